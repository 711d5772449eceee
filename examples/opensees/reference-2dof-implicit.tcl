# The model of genericclient-2dof-implicit.tcl with the ideal linear springs in place of the
# drths site (uniaxialMaterial Elastic 1.0e7 in x and 2.0e7 in y), the same analysis: the
# reference its record is compared with (docs/openfresco.md).
#
#   OpenSees examples/opensees/reference-2dof-implicit.tcl 0 reference-2dof-implicit.out
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "reference-2dof-implicit.out"}]
set specimen reference
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
wipe
