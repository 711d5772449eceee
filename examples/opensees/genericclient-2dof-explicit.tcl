# OpenSees genericClient with two DOF (-dof 1 2) against a drths actuator site with two
# actuator channels, explicit integration (docs/openfresco.md, "Several DOF in one connection").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-2dof-explicit.tcl 8090 site-2dof-explicit.out
#
# Arguments: the site's port (8090) and the displacement record file (site-2dof-explicit.out).
# Compare the record with reference-2dof-explicit.tcl's: with the ideal linear springs of
# linear-springs-2dof-ideal.yaml they agree to rounding in x and in y. analysis.tcl explains the
# analysis, the arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample genericClient explicit 2 site-2dof-explicit.out
