/* An emulated comedi device for running the unmodified comedilib without a kernel module or a
 * board (docs/comedi.md). libdrths_comedi_emu.so defines open, close, ioctl and fstat; loaded
 * before libc (LD_PRELOAD, or linked ahead of libc as the tests do) it takes over the `open` of
 * one device path and answers comedilib's ioctls on that file descriptor the way the kernel's
 * comedi core does (comedi.h): COMEDI_DEVINFO, COMEDI_SUBDINFO, COMEDI_CHANINFO,
 * COMEDI_RANGEINFO, COMEDI_INSN and COMEDI_INSNLIST with INSN_READ, INSN_WRITE, INSN_BITS,
 * INSN_CONFIG (digital direction) and INSN_GTOD. Everything else passes through to libc.
 *
 * The board, "emu-6221" of driver "drths_comedi_emu", is modelled on a common 16-bit
 * multifunction board (an M-series card of the NI PCI-6221 kind):
 *   subdevice 0  analog input, 16 channels, 16 bits, ranges +/-10, +/-5, +/-1, +/-0.2 V,
 *                ground/common/differential reference, SOFT-CALIBRATED: the raw converter has
 *                a gain and an offset error per range, which the calibration file
 *                (examples/comedi-emu.calibration, comedi_soft_calibrate's format) corrects.
 *   subdevice 1  analog output, 2 channels, 16 bits, ranges +/-10 V, +/-5 V and 0..20 mA (a
 *                current range, which the DAQ back end must refuse), hardware-calibrated,
 *                reads back the last code written.
 *   subdevice 2  digital I/O, 8 lines.
 *
 * Behind the analog channels, when an experiment file is given, is the virtual specimen
 * (common/models/specimen.h) wired as the experiment's `daq` section says: the codes written to the
 * command_out and current_out channels are turned into volts by the DAC and into the drive (m)
 * and damper command (A or V) by the channel's units_per_volt and offset; each read of the
 * displacement_in channel is one tick of the specimen (the board's sample clock is the site's
 * tick, as in the virtual back end); the measured displacement and force leave as volts, then
 * codes through the ADC's transfer, with its quantisation and its saturation at 0 and 65535.
 * The specimen's own converter model is switched off (adc_bits 0): the board quantises.
 *
 * Configuration, read at the first open of the device (environment):
 *   DRTHS_COMEDI_EMU_DEVICE      the path taken over (default /dev/comedi0); the file need not
 *                                exist. Any other path opens as usual.
 *   DRTHS_COMEDI_EMU_EXPERIMENT  an experiment file: its specimen and actuator sections make the
 *                                specimen, its daq section the wiring. Without it the inputs
 *                                read 0 V (or what DRTHS_COMEDI_EMU_FAULT forces).
 *   DRTHS_COMEDI_EMU_FAULT       a fault, counted in data instructions (INSN_READ/INSN_WRITE on
 *                                the analog subdevices; four per tick of the actuator site):
 *                                "fail:N:ERR"      from the (N+1)th on, every data instruction
 *                                                  fails with errno ERR (EIO, ENODEV,
 *                                                  ETIMEDOUT, EBUSY or a number), as a board
 *                                                  that stops answering or is unplugged;
 *                                "saturate:N:CHAN" from the (N+1)th on, analog input CHAN
 *                                                  reads full scale (65535), as an overloaded
 *                                                  load cell.
 *
 * The functions below let a test that links the library directly steer it. They are for tests
 * and tools, take the board's lock, and may be called from any thread.
 */
#ifndef DRTHS_COMEDI_EMU_H
#define DRTHS_COMEDI_EMU_H

#include <comedi.h>

#define DRTHS_COMEDI_EMU_AI_SUBDEVICE 0
#define DRTHS_COMEDI_EMU_AO_SUBDEVICE 1
#define DRTHS_COMEDI_EMU_DIO_SUBDEVICE 2
#define DRTHS_COMEDI_EMU_AI_CHANNELS 16
#define DRTHS_COMEDI_EMU_AO_CHANNELS 2
#define DRTHS_COMEDI_EMU_MAXDATA 65535u

/* Forgets every setting and the specimen, and reads the environment again at the next open of
 * the device (device path, experiment, fault). Fails with -EBUSY while the device is open. */
int drths_comedi_emu_reset(void);

/* Forces analog input chan to volts at the connector (NaN: back to the specimen, or 0 V). */
void drths_comedi_emu_set_input(unsigned chan, double volts);

/* The last code written to analog output chan (32768, mid-scale, before any write). */
lsampl_t drths_comedi_emu_output_code(unsigned chan);

/* From the (n+1)th data instruction from now on, each one fails with errnum; errnum 0 clears. */
void drths_comedi_emu_fail_after(unsigned long n, int errnum);

/* The raw code the analog input converter gives for volts on range rng (its gain and offset
 * errors, rounding and saturation): what the calibration file undoes. */
lsampl_t drths_comedi_emu_ai_code(unsigned rng, double volts);

#endif
