# OpenFresco expControl GenericTCP (with expSetup NoTransformation -dof 1 2, expSite LocalSite
# and expElement twoNodeLink -dir 1 2) against a drths actuator site with two actuator channels,
# explicit integration (docs/openfresco.md, "ShadowSite and GenericTCP" and "Several DOF in
# one connection").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/generictcp-2dof-explicit.tcl 8090 site-2dof-explicit.out \
#       </dev/null
#
# Arguments: the site's port (8090), the displacement record file (site-2dof-explicit.out) and the
# element's initial stiffnesses in x and y (default the specimens', 1.0e7 and 2.0e7 N/m; explicit
# integration does not use them). Needs OpenFresco's Tcl package (OpenFresco.so on LD_LIBRARY_PATH).
# Compare the record with reference-2dof-explicit.tcl's: with the ideal linear springs of
# linear-springs-2dof-ideal.yaml they agree to rounding in x and in y. analysis.tcl explains the
# analysis, the arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample genericTCP explicit 2 site-2dof-explicit.out
