# OpenFresco expControl GenericTCP (with expSetup OneActuator, expSite LocalSite and
# expElement twoNodeLink) against a drths actuator site,
# implicit integration with Newton iterations (docs/openfresco.md, "ShadowSite and GenericTCP").
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   LD_LIBRARY_PATH=/path/to/openfresco/lib \
#       OpenSees examples/opensees/generictcp-1dof-implicit.tcl 8090 site-implicit.out </dev/null
#
# GenericTCP asks the operator twice at its set-up to press Enter (before and after it reads
# the controller's initial values); end-of-file answers both. The site's step watchdog runs
# meanwhile: answer within --openfresco-step-timeout (10 s) or raise it.
# Arguments: the site's port (8090), the displacement record file (site-implicit.out), the
# convergence tolerance (1e-9 m), the element's initial stiffness (default the specimen's, 1.0e7
# N/m) and the Newton variant: `tangent` (the default) or `initial`. Needs OpenFresco's Tcl package
# (OpenFresco.so on LD_LIBRARY_PATH). Compare the record with reference-1dof-implicit.tcl's.
# analysis.tcl explains the analysis, the arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample genericTCP implicit 1 site-implicit.out
