# The two-degree-of-freedom model shared by the two-DOF examples in this folder
# (docs/openfresco.md, "Several DOF in one connection"). A 5.0e4 kg floor (node 2, free in x
# and y) on storey springs of 7.3955e7 N/m in x and 5.0e7 N/m in y to the ground (node 1,
# fixed), 2 % Rayleigh mass-proportional damping at the x frequency, and a specimen between the
# ground and the floor in each direction. The caller defines the specimen (element tag 2) and
# the analysis; this file reads `specimen` from the caller:
#   genericClient  the drths actuator site at 127.0.0.1:$port, its two actuator channels on
#                  node 2's x (channel 1) and y (channel 2): element genericClient -dof 1 2
#   shadowSite     OpenFresco's expSite ShadowSite to the drths site (its actor site) and an
#                  expElement twoNodeLink -dir 1 2: the trial vector is [x, y]
#   genericTCP     OpenFresco's expControl GenericTCP to the drths site (the controller), with
#                  expSetup NoTransformation -dof 1 2 (two control displacements, two measured
#                  displacements and forces), expSite LocalSite and expElement twoNodeLink
#                  -dir 1 2
#   reference      the ideal linear springs, uniaxialMaterial Elastic 1.0e7 in x and 2.0e7 in y
# shadowSite and genericTCP need OpenFresco's Tcl package (OpenFresco.so on LD_LIBRARY_PATH);
# their twoNodeLink's -initStif is diag(kInitX, kInitY), from the caller's kInit (a list of
# the two, x and y) if it set it, else the specimen's stiffnesses.
# Ground motion: a 2 Hz sine of 4 m/s^2 in x and a 3 Hz sine of 3 m/s^2 in y for `duration` s.
wipe
model BasicBuilder -ndm 2 -ndf 2
set mass 5.0e4
set kStoreyX 7.3955e7
set kStoreyY 5.0e7
set kSpecimenX 1.0e7
set kSpecimenY 2.0e7
node 1 0.0 0.0
node 2 0.0 0.0 -mass $mass $mass
fix 1 1 1
uniaxialMaterial Elastic 1 $kStoreyX
uniaxialMaterial Elastic 2 $kStoreyY
element zeroLength 1 1 2 -mat 1 2 -dir 1 2
if {![info exists kInit]} {
    set kInit [list $kSpecimenX $kSpecimenY]
}
lassign $kInit kInitX kInitY
if {$specimen eq "genericClient"} {
    # The drths site listens on 127.0.0.1:$port (drths-physical --openfresco 127.0.0.1:$port);
    # its experiment file declares two channels (linear-springs-2dof-ideal.yaml): the trial
    # displacement vector is node 2's [x, y], channel 1 takes x and channel 2 takes y.
    element genericClient 2 -node 2 -dof 1 2 -server $port 127.0.0.1
} elseif {$specimen eq "shadowSite"} {
    # The drths site is the laboratory's actor site (two channels); the element (zero length:
    # local x and y are global x and y) sends it trial [x, y] and takes the measured forces.
    loadPackage OpenFresco
    expSite ShadowSite 1 "127.0.0.1" $port
    expElement twoNodeLink 2 1 2 -dir 1 2 -site 1 -initStif $kInitX 0.0 0.0 $kInitY
} elseif {$specimen eq "genericTCP"} {
    # The setup and site stay in OpenSees; the drths site is the generic controller of two
    # actuators. -ctrlModes 1 0 0 0 1: displacements and the analysis time (the site counts
    # the steps from the time, so Newton iterations are iterations); -daqModes 1 0 0 1 0:
    # measured displacements and forces.
    loadPackage OpenFresco
    expControl GenericTCP 1 "127.0.0.1" $port -ctrlModes 1 0 0 0 1 -daqModes 1 0 0 1 0
    expSetup NoTransformation 1 -control 1 -dof 1 2 -sizeTrialOut 2 2
    expSite LocalSite 1 1
    expElement twoNodeLink 2 1 2 -dir 1 2 -site 1 -initStif $kInitX 0.0 0.0 $kInitY
} else {
    uniaxialMaterial Elastic 3 $kSpecimenX
    uniaxialMaterial Elastic 4 $kSpecimenY
    element zeroLength 2 1 2 -mat 3 4 -dir 1 2
}
set omega [expr {sqrt(($kStoreyX + $kSpecimenX) / $mass)}]
rayleigh [expr {2.0 * 0.02 * $omega}] 0.0 0.0 0.0
timeSeries Sine 1 0.0 $duration 0.5 -factor 4.0
timeSeries Sine 2 0.0 $duration [expr {1.0 / 3.0}] -factor 3.0
pattern UniformExcitation 1 1 -accel 1
pattern UniformExcitation 2 2 -accel 2
recorder Node -file $outFile -precision 16 -time -node 2 -dof 1 2 disp
