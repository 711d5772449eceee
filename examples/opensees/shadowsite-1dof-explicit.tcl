# OpenFresco expSite ShadowSite (with expElement twoNodeLink) against a drths actuator site,
# explicit integration (docs/openfresco.md, "ShadowSite and GenericTCP").
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/shadowsite-1dof-explicit.tcl 8090 site-explicit.out
#
# Arguments: the site's port (8090), the displacement record file (site-explicit.out) and the
# element's initial stiffness (default the specimen's, 1.0e7 N/m; explicit integration does not use
# it). Needs OpenFresco's Tcl package (OpenFresco.so on LD_LIBRARY_PATH). Compare the record with
# reference-1dof-explicit.tcl's: with the ideal linear specimen of linear-spring-ideal.yaml they
# agree to rounding. analysis.tcl explains the analysis, the arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample shadowSite explicit 1 site-explicit.out
