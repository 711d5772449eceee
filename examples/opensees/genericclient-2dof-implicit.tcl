# OpenSees genericClient with two DOF (-dof 1 2) against a drths actuator site with two
# actuator channels, implicit integration with Newton iterations (docs/openfresco.md, "Several
# DOF in one connection" and "Repeats and iterations").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-2dof-implicit.tcl 8090 site-2dof-implicit.out
#
# Arguments: the site's port (8090) and the displacement record file (site-2dof-implicit.out).
# Newton with the initial stiffness iterates: each new trial of a step is an iteration the site
# plays as a short ramp, and the step ends when OpenSees commits. Compare the record with
# reference-2dof-implicit.tcl's.
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "site-2dof-implicit.out"}]
set specimen genericClient
set duration 5.0
set dt 0.01
source [file join [file dirname [info script]] model-2dof.tcl]
constraints Plain
numberer Plain
system BandGeneral
# The tolerance (third argument, default 1e-9 m) must lie above the displacement the sensor
# noise makes the force jitter by (noise / effective stiffness), else the iterations never
# converge on a real specimen.
set tol [expr {[llength $argv] > 2 ? [lindex $argv 2] : 1.0e-9}]
test NormDispIncr $tol 25
algorithm Newton -initial
integrator Newmark 0.5 0.25
analysis Transient
set ok [analyze [expr {int($duration / $dt)}] $dt]
puts "analyze: $ok"
# Removing the element sends the site DIE, which ends the session cleanly (exit 0); OpenSees
# also sends it when it exits at the end of the script.
remove recorders
remove element 2
wipe
