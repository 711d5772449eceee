# OpenFresco expSite ShadowSite (with expElement twoNodeLink) against a drths actuator site,
# explicit integration (docs/openfresco.md, "ShadowSite and GenericTCP").
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/shadowsite-1dof-explicit.tcl 8090 site-explicit.out
#
# Arguments: the site's port (8090), the displacement record file (site-explicit.out) and the
# element's initial stiffness (default the specimen's, 1.0e7 N/m; explicit integration does
# not use it). Needs OpenFresco's Tcl package (OpenFresco.so on LD_LIBRARY_PATH). Compare the
# record with reference-1dof-explicit.tcl's: with the ideal linear specimen of
# linear-spring-ideal.yaml they agree to rounding.
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "site-explicit.out"}]
if {[llength $argv] > 2} {
    set kInit [lindex $argv 2]
}
set specimen shadowSite
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
# OpenFresco's objects outlive wipe; wipeExp deletes them, which sends the site DIE and ends
# the session cleanly (exit 0). Without it OpenSees exits without DIE and the site reports a
# lost client (HOLD, exit 1).
remove recorders
wipe
wipeExp
