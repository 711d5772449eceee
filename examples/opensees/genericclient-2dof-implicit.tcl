# OpenSees genericClient with two DOF (-dof 1 2) against a drths actuator site with two
# actuator channels, implicit integration with Newton iterations (docs/openfresco.md, "Several
# DOF in one connection" and "Repeats and iterations").
#
#   drths-physical --experiment examples/opensees/linear-springs-2dof-ideal.yaml \
#       --openfresco 127.0.0.1:8090 --step-duration 0.01 --out run &
#   OpenSees examples/opensees/genericclient-2dof-implicit.tcl 8090 site-2dof-implicit.out
#
# Arguments: the site's port (8090), the displacement record file (site-2dof-implicit.out) and the
# convergence tolerance (1e-9 m). Newton with the initial stiffness iterates: each new trial of a
# step is an iteration the site plays as a short ramp, and the step ends when OpenSees commits.
# Compare the record with reference-2dof-implicit.tcl's. analysis.tcl explains the analysis, the
# arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample genericClient implicit 2 site-2dof-implicit.out
