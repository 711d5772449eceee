# OpenSees genericClient with two DOF (-dof 1 2) against a drths actuator site with two
# actuator channels, explicit integration (docs/openfresco.md, "Several DOF in one connection").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-2dof-explicit.tcl 8090 site-2dof-explicit.out
#
# Arguments: the site's port (8090) and the displacement record file (site-2dof-explicit.out).
# Compare the record with reference-2dof-explicit.tcl's: with the ideal linear springs of
# linear-springs-2dof-ideal.yaml they agree to rounding in x and in y.
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "site-2dof-explicit.out"}]
set specimen genericClient
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
# Removing the element sends the site DIE, which ends the session cleanly (exit 0); OpenSees
# also sends it when it exits at the end of the script.
remove recorders
remove element 2
wipe
