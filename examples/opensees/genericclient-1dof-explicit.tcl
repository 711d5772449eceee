# OpenSees genericClient against a drths actuator site, explicit integration (docs/openfresco.md).
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-1dof-explicit.tcl 8090 site-explicit.out
#
# Arguments: the site's port (8090) and the displacement record file (site-explicit.out).
# Compare the record with reference-1dof-explicit.tcl's: with the ideal linear specimen of
# linear-spring-ideal.yaml they agree to rounding.
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "site-explicit.out"}]
set specimen genericClient
set duration 5.0
set dt 0.01
source [file join [file dirname [info script]] model-1dof.tcl]
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
