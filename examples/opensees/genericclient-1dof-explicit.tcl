# OpenSees genericClient against a drths actuator site, explicit integration (docs/openfresco.md).
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-1dof-explicit.tcl 8090 site-explicit.out
#
# Arguments: the site's port (8090) and the displacement record file (site-explicit.out). Compare
# the record with reference-1dof-explicit.tcl's: with the ideal linear specimen of
# linear-spring-ideal.yaml they agree to rounding. analysis.tcl explains the analysis, the arguments
# and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample genericClient explicit 1 site-explicit.out
