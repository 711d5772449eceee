# OpenFresco expControl GenericTCP (with expSetup NoTransformation -dof 1 2, expSite LocalSite
# and expElement twoNodeLink -dir 1 2) against a drths actuator site with two actuator channels,
# implicit integration with Newton iterations (docs/openfresco.md, "ShadowSite and GenericTCP"
# and "Several DOF in one connection").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/generictcp-2dof-implicit.tcl 8090 site-2dof-implicit.out \
#       </dev/null
#
# Arguments: the site's port (8090), the displacement record file (site-2dof-implicit.out), the
# convergence tolerance (1e-9 m), the element's initial stiffnesses in x and y (default the
# specimens', 1.0e7 and 2.0e7 N/m) and the Newton variant: `tangent` (the default) or
# `initial`. Each new trial of a step after the first is an iteration the site plays as a
# short ramp; the site counts the steps from the trials' time (GenericTCP never commits).
# Needs OpenFresco's Tcl package (OpenFresco.so on LD_LIBRARY_PATH).
# Compare the record with reference-2dof-implicit.tcl's.
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "site-2dof-implicit.out"}]
if {[llength $argv] > 4} {
    set kInitX [lindex $argv 3]
    set kInitY [lindex $argv 4]
}
set specimen genericTCP
set duration 5.0
set dt 0.01
source [file join [file dirname [info script]] model-2dof.tcl]
constraints Plain
numberer Plain
system BandGeneral
# The tolerance must lie above the displacement the sensor noise makes the force jitter by
# (noise / effective stiffness), else the iterations never converge on a real specimen.
set tol [expr {[llength $argv] > 2 ? [lindex $argv 2] : 1.0e-9}]
test NormDispIncr $tol 25
# Newton with the tangent, not -initial: OpenFresco 2.8.0's twoNodeLink loses its -initStif
# when it joins the domain (getInitialStiff answers zero); its getTangentStiff answers
# -initStif, on which Newton converges at once on a linear specimen (docs/openfresco.md).
if {[llength $argv] > 5 && [lindex $argv 5] eq "initial"} {
    algorithm Newton -initial
} else {
    algorithm Newton
}
integrator Newmark 0.5 0.25
analysis Transient
set ok [analyze [expr {int($duration / $dt)}] $dt]
puts "analyze: $ok"
# OpenFresco's objects outlive wipe; wipeExp deletes them, which sends the site DIE and ends
# the session cleanly (exit 0). Without it OpenSees exits without DIE and the site reports a
# lost client (HOLD, exit 1).
remove recorders
wipe
wipeExp
