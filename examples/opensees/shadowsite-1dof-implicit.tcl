# OpenFresco expSite ShadowSite (with expElement twoNodeLink) against a drths actuator site,
# implicit integration with Newton iterations (docs/openfresco.md, "ShadowSite and GenericTCP").
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/shadowsite-1dof-implicit.tcl 8090 site-implicit.out
#
# Arguments: the site's port (8090), the displacement record file (site-implicit.out), the
# convergence tolerance (1e-9 m), the element's initial stiffness (default the specimen's, 1.0e7
# N/m) and the Newton variant: `tangent` (the default) or `initial`. Needs OpenFresco's Tcl package
# (OpenFresco.so on LD_LIBRARY_PATH). Compare the record with reference-1dof-implicit.tcl's.
# analysis.tcl explains the analysis, the arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample shadowSite implicit 1 site-implicit.out
