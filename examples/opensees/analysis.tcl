# The arguments and the two analyses shared by the examples in this folder (docs/openfresco.md).
# An example sources this file and calls runExample with its specimen (genericClient,
# shadowSite, genericTCP or reference: the specimen element of model-1dof.tcl and
# model-2dof.tcl), its integration (explicit or implicit), its model's DOF count (1 or 2) and its
# default record file:
#   source [file join [file dirname [info script]] analysis.tcl]
#   runExample shadowSite explicit 2 site-2dof-explicit.out
# runExample sets `specimen`, `duration` (5.0 s) and `dt` (0.01 s), then
#   exampleArguments explicit|implicit NDOF DEFAULT_RECORD   reads the script's arguments
#   source model-1dof.tcl or model-2dof.tcl                   builds the model and its recorder
#   exampleAnalysis explicit|implicit                        runs the analysis and ends it
#
# The arguments, in this order (each optional, with its default):
#   port       the drths site's TCP port on 127.0.0.1 (8090; the references ignore it)
#   record     the displacement record file (DEFAULT_RECORD): time, then node 2's displacement
#              (x, and y for the two-DOF model), 16 digits
#   tolerance  implicit only: the NormDispIncr tolerance of the Newton iterations (1e-9 m)
#   kInit      shadowSite and genericTCP only: the twoNodeLink's -initStif, one value (1 DOF) or
#              two, x and y (2 DOF; both or neither), each a number (else an error), default
#              the ideal specimen's stiffness (model-1dof.tcl, model-2dof.tcl); the explicit
#              analysis does not use it
#   newton     shadowSite and genericTCP implicit only: `initial` for Newton -initial, anything
#              else (the default `tangent`) for Newton
# Arguments past those an example reads are ignored, so one argument list (run-example.sh's
# $OPENSEES_ARGS) serves an example and its reference.

# The folder of this file and of the models, taken when an example sources it.
set exampleDir [file dirname [info script]]

# Reads the arguments into the globals the model and the analysis use: port, outFile, tol
# (implicit), kInit (a list of NDOF numbers) when given, and newton.
proc exampleArguments {integration ndof defaultRecord} {
    global argv port outFile tol kInit newton specimen
    set port [expr {[llength $argv] > 0 ? [lindex $argv 0] : 8090}]
    set outFile [expr {[llength $argv] > 1 ? [lindex $argv 1] : $defaultRecord}]
    set next 2
    if {$integration eq "implicit"} {
        set tol [expr {[llength $argv] > 2 ? [lindex $argv 2] : 1.0e-9}]
        set next 3
    }
    # Only the twoNodeLink of OpenFresco takes an initial stiffness and a choice of Newton:
    # genericClient asks the site for none and the references are exact springs.
    set newton initial
    if {$specimen ne "shadowSite" && $specimen ne "genericTCP"} {
        return
    }
    # NDOF values or none: each must be a number, so a shorter list of another model's arguments
    # (1e-9 1e7 initial to a two-DOF script) is refused rather than read as stiffnesses.
    set k [lrange $argv $next [expr {$next + $ndof - 1}]]
    foreach value $k {
        if {![string is double -strict $value]} {
            error "the initial stiffness must be a number (N/m), not \"$value\""
        }
    }
    if {[llength $k] > 0} {
        if {[llength $k] != $ndof} {
            error "the initial stiffness needs $ndof values (x and y) or none, got [llength $k]"
        }
        set kInit $k
    }
    incr next $ndof
    set newton tangent
    if {[llength $argv] > $next && [lindex $argv $next] eq "initial"} {
        set newton initial
    }
}

# Runs the explicit or the implicit analysis of `duration` s in steps of `dt`, prints
# "analyze: 0" on success, and ends the session with the site.
#
# explicit: CentralDifference with algorithm Linear: one trial displacement a step, played by
# the site as one step; no iterations, so the element's initial stiffness is not used.
#
# implicit: Newmark 0.5 0.25 (average acceleration) with Newton iterations. Each new trial of a
# step after the first is an iteration the site plays as a short ramp; the step ends when
# OpenSees commits (genericClient, ShadowSite) or with the next step's trial (GenericTCP, which
# never commits: the site counts the steps from the trials' time). The tolerance must lie above
# the displacement the sensor noise makes the force jitter by (noise / effective stiffness),
# else the iterations never converge on a real specimen.
# genericClient and the references use Newton with the initial stiffness. OpenFresco's
# twoNodeLink uses Newton with the tangent by default: OpenFresco 2.8.0's twoNodeLink loses its
# -initStif when it joins the domain (getInitialStiff answers zero), so `Newton -initial`
# iterates as if the specimen had no stiffness, about two more iterations a step
# (docs/openfresco.md); its getTangentStiff answers -initStif, on which Newton converges at once
# on a linear specimen.
#
# The end: genericClient's element sends the site DIE when it is removed, which ends the session
# cleanly (exit 0); OpenSees also sends it when it exits at the end of the script. OpenFresco's
# objects outlive wipe; wipeExp deletes them, which sends the site DIE and ends the session
# cleanly (exit 0). Without it OpenSees exits without DIE and the site reports a lost client
# (HOLD, exit 1).
proc exampleAnalysis {integration} {
    global specimen duration dt tol newton
    constraints Plain
    numberer Plain
    system BandGeneral
    if {$integration eq "explicit"} {
        algorithm Linear
        integrator CentralDifference
    } else {
        test NormDispIncr $tol 25
        if {$newton eq "initial"} {
            algorithm Newton -initial
        } else {
            algorithm Newton
        }
        integrator Newmark 0.5 0.25
    }
    analysis Transient
    set ok [analyze [expr {int($duration / $dt)}] $dt]
    puts "analyze: $ok"
    if {$specimen eq "genericClient"} {
        remove recorders
        remove element 2
        wipe
    } elseif {$specimen eq "shadowSite" || $specimen eq "genericTCP"} {
        remove recorders
        wipe
        wipeExp
    } else {
        wipe
    }
}

# Runs an example: the specimen `spec`, the explicit or implicit analysis, the model of `ndof`
# DOF (model-1dof.tcl or model-2dof.tcl, sourced at the global level: it reads and sets
# globals) and `defaultRecord` as the record file when the arguments name none.
proc runExample {spec integration ndof defaultRecord} {
    global specimen duration dt exampleDir
    set specimen $spec
    set duration 5.0
    set dt 0.01
    exampleArguments $integration $ndof $defaultRecord
    uplevel #0 [list source [file join $exampleDir model-${ndof}dof.tcl]]
    exampleAnalysis $integration
}
