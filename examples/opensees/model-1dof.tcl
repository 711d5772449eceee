# The one-degree-of-freedom model shared by the examples in this folder (docs/openfresco.md).
# A 5.0e4 kg floor on a 7.3955e7 N/m storey (node 1 fixed, node 2 free in x), 2 % Rayleigh mass-
# proportional damping, and a specimen between the ground and the floor. The caller defines the
# specimen (element tag 2) and the analysis; this file reads `specimen` from the caller:
#   genericClient  the drths actuator site at 127.0.0.1:$port (element genericClient)
#   shadowSite     the same through OpenFresco: expSite ShadowSite and expElement twoNodeLink
#   genericTCP     the same through OpenFresco: expControl GenericTCP, expSetup OneActuator,
#                  expSite LocalSite and expElement twoNodeLink
#   reference      the ideal linear spring, uniaxialMaterial Elastic $kSpecimen
# The OpenFresco specimens need OpenFresco's Tcl package (loadPackage OpenFresco: OpenFresco.so
# on LD_LIBRARY_PATH) and give the element the initial stiffness $kInit (default $kSpecimen).
# Ground motion: a 2 Hz sine of 4 m/s^2 for `duration` s (UniformExcitation).
wipe
model BasicBuilder -ndm 1 -ndf 1
set mass 5.0e4
set kStorey 7.3955e7
set kSpecimen 1.0e7
node 1 0.0
node 2 0.0 -mass $mass
fix 1 1
uniaxialMaterial Elastic 1 $kStorey
element zeroLength 1 1 2 -mat 1 -dir 1
if {![info exists kInit]} {
    set kInit $kSpecimen
}
if {$specimen eq "genericClient"} {
    # The drths site listens on 127.0.0.1:$port (drths-physical --openfresco 127.0.0.1:$port).
    element genericClient 2 -node 2 -dof 1 -server $port 127.0.0.1
} elseif {$specimen eq "shadowSite"} {
    # The drths site is the laboratory's actor site; the element sends it trial displacements
    # (with velocity, acceleration and time) and takes the measured force.
    loadPackage OpenFresco
    expSite ShadowSite 1 "127.0.0.1" $port
    expElement twoNodeLink 2 1 2 -dir 1 -site 1 -initStif $kInit
} elseif {$specimen eq "genericTCP"} {
    # The setup and site stay in OpenSees; the drths site is the generic controller, which
    # gets control displacements and answers the measured displacement and force.
    loadPackage OpenFresco
    expControl GenericTCP 1 "127.0.0.1" $port -ctrlModes 1 0 0 0 1 -daqModes 1 0 0 1 0
    expSetup OneActuator 1 -control 1 1 -sizeTrialOut 1 1
    expSite LocalSite 1 1
    expElement twoNodeLink 2 1 2 -dir 1 -site 1 -initStif $kInit
} else {
    uniaxialMaterial Elastic 2 $kSpecimen
    element zeroLength 2 1 2 -mat 2 -dir 1
}
set omega [expr {sqrt(($kStorey + $kSpecimen) / $mass)}]
rayleigh [expr {2.0 * 0.02 * $omega}] 0.0 0.0 0.0
timeSeries Sine 1 0.0 $duration 0.5 -factor 4.0
pattern UniformExcitation 1 1 -accel 1
recorder Node -file $outFile -precision 16 -time -node 2 -dof 1 disp
