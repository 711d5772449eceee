# The model of genericclient-2dof-explicit.tcl with the ideal linear springs in place of the
# drths site (uniaxialMaterial Elastic 1.0e7 in x and 2.0e7 in y), the same analysis: the
# reference its record is compared with (docs/openfresco.md).
#
#   OpenSees examples/opensees/reference-2dof-explicit.tcl 0 reference-2dof-explicit.out
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "reference-2dof-explicit.out"}]
set specimen reference
set duration 5.0
set dt 0.01
source [file join [file dirname [info script]] model-2dof.tcl]
constraints Plain
numberer Plain
system BandGeneral
algorithm Linear
integrator CentralDifference
analysis Transient
set ok [analyze [expr {int($duration / $dt)}] $dt]
puts "analyze: $ok"
wipe
