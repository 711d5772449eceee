# OpenFresco expSite ShadowSite (with expElement twoNodeLink -dir 1 2) against a drths actuator
# site with two actuator channels, explicit integration (docs/openfresco.md, "ShadowSite and
# GenericTCP" and "Several DOF in one connection").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/shadowsite-2dof-explicit.tcl 8090 site-2dof-explicit.out \
#       </dev/null
#
# Arguments: the site's port (8090), the displacement record file (site-2dof-explicit.out) and
# the element's initial stiffnesses in x and y (default the specimens', 1.0e7 and 2.0e7 N/m;
# explicit integration does not use them). Needs OpenFresco's Tcl package (OpenFresco.so on
# LD_LIBRARY_PATH). Compare the record with reference-2dof-explicit.tcl's: with the ideal
# linear springs of linear-springs-2dof-ideal.yaml they agree to rounding in x and in y.
set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : "site-2dof-explicit.out"}]
if {[llength $argv] > 3} {
    set kInitX [lindex $argv 2]
    set kInitY [lindex $argv 3]
}
set specimen shadowSite
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
# OpenFresco's objects outlive wipe; wipeExp deletes them, which sends the site DIE and ends
# the session cleanly (exit 0). Without it OpenSees exits without DIE and the site reports a
# lost client (HOLD, exit 1).
remove recorders
wipe
wipeExp
