# The model of genericclient-1dof-explicit.tcl with the ideal linear spring in place of the
# drths site (uniaxialMaterial Elastic 1.0e7), the same analysis: the reference its record is
# compared with (docs/openfresco.md).
#
#   OpenSees examples/opensees/reference-1dof-explicit.tcl 0 reference-explicit.out
#
# Arguments: a port (ignored; run-example.sh passes 0) and the displacement record file
# (reference-explicit.out); further arguments are ignored, so the client example's list serves here
# too. analysis.tcl explains the analysis, the arguments and the end of the session.
source [file join [file dirname [info script]] analysis.tcl]
runExample reference explicit 1 reference-explicit.out
