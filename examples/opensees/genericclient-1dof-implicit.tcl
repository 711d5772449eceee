# OpenSees genericClient against a drths actuator site, implicit integration with Newton
# iterations (docs/openfresco.md, "Repeats and iterations").
#
#   drths-physical --experiment examples/opensees/linear-spring-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-1dof-implicit.tcl 8090 site-implicit.out
#
# Arguments: the site's port (8090), the displacement record file (site-implicit.out) and the
# convergence tolerance (1e-9 m). Newton with the initial stiffness iterates: each new trial of a
# step is an iteration the site plays as a short ramp, and the step ends when OpenSees commits.
# Compare the record with reference-1dof-implicit.tcl's. analysis.tcl explains the analysis, the
# arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample genericClient implicit 1 site-implicit.out
