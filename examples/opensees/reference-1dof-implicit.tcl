# The model of genericclient-1dof-implicit.tcl with the ideal linear spring in place of the
# drths site (uniaxialMaterial Elastic 1.0e7), the same analysis: the reference its record is
# compared with (docs/openfresco.md).
#
#   OpenSees examples/opensees/reference-1dof-implicit.tcl 0 reference-implicit.out
#
# Arguments: a port (ignored; run-example.sh passes 0), the displacement record file
# (reference-implicit.out) and the convergence tolerance (1e-9 m); further arguments are ignored, so
# the client example's list serves here too. analysis.tcl explains the analysis, the arguments and
# the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample reference implicit 1 reference-implicit.out
