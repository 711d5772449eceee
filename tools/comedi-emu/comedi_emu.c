/* The emulated comedi device (tools/comedi-emu/comedi_emu.h): the board, its ioctls as the
 * comedi core answers them, the specimen behind the analog channels, and the libc functions it
 * takes over (open, close, ioctl, fstat).
 *
 * The answers follow comedi's public ioctl interface (comedi.h): the range_type of a subdevice
 * encodes its index in bits 27:24 and the length of its range table in bits 15:0, and
 * COMEDI_RANGEINFO refuses a range_type whose length does not match; an instruction names a
 * subdevice that exists, a channel below n_chan and a range inside the table, else EINVAL; a
 * value written above maxdata is EINVAL; an unused subdevice is EIO; COMEDI_INSN returns the
 * number of samples done, COMEDI_INSNLIST the number of instructions; an unknown request is
 * ENOTTY. A failure is -1 with errno set, as the ioctl system call gives it.
 */
#include "tools/comedi-emu/comedi_emu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/config/config.h"
#include "common/config/setup.h"
#include "common/models/specimen.h"

#define EXPORT __attribute__((visibility("default")))

#define MAXDATA DRTHS_COMEDI_EMU_MAXDATA
#define N_SUBDEVS 3
#define DIO_LINES 8
#define MAX_FDS 16

/* ---- the board ------------------------------------------------------------------------------ */

static const comedi_krange ai_ranges[] = {
    {-10000000, 10000000, UNIT_volt},
    {-5000000, 5000000, UNIT_volt},
    {-1000000, 1000000, UNIT_volt},
    {-200000, 200000, UNIT_volt},
};
/* The raw converter's errors per range, which the soft calibration corrects: the code is that of
 * gain * v + offset. A few tenths of a per cent and a few mV, as an uncalibrated card. */
static const double ai_gain[] = {1.0012, 0.9991, 1.0015, 0.9980};
static const double ai_offset_v[] = {0.0035, -0.0021, 0.00042, -0.00012};

static const comedi_krange ao_ranges[] = {
    {-10000000, 10000000, UNIT_volt},
    {-5000000, 5000000, UNIT_volt},
    {0, 20000000, UNIT_mA},
};
static const comedi_krange dio_ranges[] = {{0, 1000000, UNIT_volt}};

typedef struct subdev {
    unsigned type, n_chan, flags;
    lsampl_t maxdata;
    const comedi_krange *ranges;
    unsigned n_ranges;
} subdev_t;

static const subdev_t subdevs[N_SUBDEVS] = {
    {COMEDI_SUBD_AI, DRTHS_COMEDI_EMU_AI_CHANNELS,
     SDF_READABLE | SDF_GROUND | SDF_COMMON | SDF_DIFF | SDF_OTHER | SDF_SOFT_CALIBRATED, MAXDATA,
     ai_ranges, sizeof ai_ranges / sizeof ai_ranges[0]},
    {COMEDI_SUBD_AO, DRTHS_COMEDI_EMU_AO_CHANNELS, SDF_READABLE | SDF_WRITABLE | SDF_GROUND,
     MAXDATA, ao_ranges, sizeof ao_ranges / sizeof ao_ranges[0]},
    {COMEDI_SUBD_DIO, DIO_LINES, SDF_READABLE | SDF_WRITABLE, 1, dio_ranges, 1},
};

static double krange_min(const comedi_krange *r)
{
    return r->min * 1e-6;
}

static double krange_max(const comedi_krange *r)
{
    return r->max * 1e-6;
}

static lsampl_t to_code(double x)
{
    if (!(x > 0.0))
        return 0;
    if (x >= MAXDATA)
        return MAXDATA;
    return (lsampl_t)floor(x + 0.5);
}

lsampl_t EXPORT drths_comedi_emu_ai_code(unsigned rng, double volts)
{
    if (rng >= sizeof ai_ranges / sizeof ai_ranges[0])
        return 0;
    const double lo = krange_min(&ai_ranges[rng]), hi = krange_max(&ai_ranges[rng]);
    const double seen = ai_gain[rng] * volts + ai_offset_v[rng];
    return to_code((seen - lo) / (hi - lo) * MAXDATA);
}

/* The DAC: exact, as a hardware-calibrated output. */
static double ao_volts(unsigned rng, lsampl_t code)
{
    const double lo = krange_min(&ao_ranges[rng]), hi = krange_max(&ao_ranges[rng]);
    return lo + (hi - lo) * code / MAXDATA;
}

/* ---- state ---------------------------------------------------------------------------------- */

/* One wired channel of the experiment's daq section. */
typedef struct wire {
    int used;
    unsigned subdev, chan, range;
    double units_per_volt, offset;
} wire_t;

enum { W_COMMAND, W_CURRENT, W_DISP, W_FORCE, N_WIRES };

static struct {
    pthread_mutex_t lock;
    int configured;
    char device[512];
    unsigned minor;
    int fds[MAX_FDS];
    int n_open;
    /* the board */
    lsampl_t ao_code[DRTHS_COMEDI_EMU_AO_CHANNELS];
    unsigned ao_range[DRTHS_COMEDI_EMU_AO_CHANNELS];
    double ai_forced[DRTHS_COMEDI_EMU_AI_CHANNELS];
    unsigned dio_bits, dio_dir;
    /* faults, counted in data instructions */
    unsigned long n_data;
    unsigned long fail_at;
    int fail_errno;
    unsigned long saturate_at;
    int saturate_chan;
    /* the specimen */
    int have_spec;
    drths_specimen_t spec;
    drths_specimen_meas_t meas;
    double dt_s, last_drive_m;
    wire_t w[N_WIRES];
} B = {.lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP};

/* ---- libc --------------------------------------------------------------------------------- */

typedef int (*open_fn)(const char *, int, ...);
typedef int (*close_fn)(int);
typedef int (*ioctl_fn)(int, unsigned long, ...);
typedef int (*fstat_fn)(int, struct stat *);

static void *next_symbol(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        static const char msg[] = "drths comedi emulator: libc symbol not found\n";
        (void)!write(2, msg, sizeof msg - 1);
        abort();
    }
    return p;
}

static open_fn real_open(void)
{
    static open_fn f;
    if (!__atomic_load_n(&f, __ATOMIC_ACQUIRE))
        __atomic_store_n(&f, (open_fn)next_symbol("open"), __ATOMIC_RELEASE);
    return __atomic_load_n(&f, __ATOMIC_ACQUIRE);
}

static close_fn real_close(void)
{
    static close_fn f;
    if (!__atomic_load_n(&f, __ATOMIC_ACQUIRE))
        __atomic_store_n(&f, (close_fn)next_symbol("close"), __ATOMIC_RELEASE);
    return __atomic_load_n(&f, __ATOMIC_ACQUIRE);
}

static ioctl_fn real_ioctl(void)
{
    static ioctl_fn f;
    if (!__atomic_load_n(&f, __ATOMIC_ACQUIRE))
        __atomic_store_n(&f, (ioctl_fn)next_symbol("ioctl"), __ATOMIC_RELEASE);
    return __atomic_load_n(&f, __ATOMIC_ACQUIRE);
}

static fstat_fn real_fstat(void)
{
    static fstat_fn f;
    if (!__atomic_load_n(&f, __ATOMIC_ACQUIRE))
        __atomic_store_n(&f, (fstat_fn)next_symbol("fstat"), __ATOMIC_RELEASE);
    return __atomic_load_n(&f, __ATOMIC_ACQUIRE);
}

static void say(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0)
        (void)!write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* ---- configuration (under the lock) ------------------------------------------------------- */

static void wire_from(wire_t *w, const drths_daq_channel_config_t *c)
{
    w->used = c->given;
    w->subdev = (unsigned)c->subdevice;
    w->chan = (unsigned)c->channel;
    w->range = (unsigned)c->range;
    w->units_per_volt = c->units_per_volt;
    w->offset = c->offset;
}

static int load_experiment(const char *path)
{
    drths_experiment_t exp;
    drths_error_t err;
    int rc = drths_experiment_load(&exp, path, &err);
    if (rc) {
        say("drths comedi emulator: DRTHS_COMEDI_EMU_EXPERIMENT: %s\n", err.msg);
        return rc;
    }
    drths_specimen_params_t sp;
    drths_setup_specimen(&exp, &sp);
    sp.adc_bits = 0; /* the board's converters quantise */
    B.dt_s = 1.0 / exp.rate_hz;
    rc = drths_specimen_init(&B.spec, &sp, B.dt_s, &err);
    if (rc) {
        say("drths comedi emulator: the specimen: %s\n", err.msg);
        drths_experiment_close(&exp);
        return rc;
    }
    wire_from(&B.w[W_COMMAND], &exp.daq.command_out);
    wire_from(&B.w[W_CURRENT], &exp.daq.current_out);
    wire_from(&B.w[W_DISP], &exp.daq.displacement_in);
    wire_from(&B.w[W_FORCE], &exp.daq.force_in);
    drths_experiment_close(&exp);
    for (int i = 0; i < N_WIRES; i++)
        if (!B.w[i].used || B.w[i].units_per_volt == 0.0) {
            say("drths comedi emulator: DRTHS_COMEDI_EMU_EXPERIMENT: the daq section must wire "
                "all four channels\n");
            drths_specimen_close(&B.spec);
            return -EINVAL;
        }
    B.have_spec = 1;
    B.meas.disp_m = B.meas.force_N = 0.0;
    B.last_drive_m = 0.0;
    return 0;
}

static int errno_of(const char *s)
{
    static const struct {
        const char *name;
        int e;
    } names[] = {{"EIO", EIO},       {"ENODEV", ENODEV}, {"ETIMEDOUT", ETIMEDOUT},
                 {"ETIME", ETIME},   {"EBUSY", EBUSY},   {"EINVAL", EINVAL},
                 {"EFAULT", EFAULT}, {"ENOMEM", ENOMEM}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0)
            return names[i].e;
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v > 0 && v < 4096 ? (int)v : 0;
}

static void parse_fault(const char *spec)
{
    char kind[16];
    unsigned long n;
    char arg[32];
    if (sscanf(spec, "%15[a-z]:%lu:%31s", kind, &n, arg) != 3) {
        say("drths comedi emulator: DRTHS_COMEDI_EMU_FAULT '%s' is not fail:N:ERR or "
            "saturate:N:CHAN; ignored\n",
            spec);
        return;
    }
    if (strcmp(kind, "fail") == 0 && errno_of(arg)) {
        B.fail_at = n + 1;
        B.fail_errno = errno_of(arg);
    } else if (strcmp(kind, "saturate") == 0 && atoi(arg) >= 0 &&
               atoi(arg) < DRTHS_COMEDI_EMU_AI_CHANNELS) {
        B.saturate_at = n + 1;
        B.saturate_chan = atoi(arg);
    } else {
        say("drths comedi emulator: DRTHS_COMEDI_EMU_FAULT '%s' not understood; ignored\n", spec);
    }
}

static void reset_board(void)
{
    if (B.have_spec)
        drths_specimen_close(&B.spec);
    B.have_spec = 0;
    memset(B.w, 0, sizeof B.w);
    for (int i = 0; i < DRTHS_COMEDI_EMU_AO_CHANNELS; i++) {
        B.ao_code[i] = (MAXDATA + 1) / 2;
        B.ao_range[i] = 0;
    }
    for (int i = 0; i < DRTHS_COMEDI_EMU_AI_CHANNELS; i++)
        B.ai_forced[i] = NAN;
    B.dio_bits = B.dio_dir = 0;
    B.n_data = B.fail_at = B.saturate_at = 0;
    B.fail_errno = 0;
    B.saturate_chan = -1;
    B.configured = 0;
}

/* Reads the environment once, at the first open after a reset. */
static void configure(void)
{
    if (B.configured)
        return;
    reset_board();
    B.configured = 1;
    const char *dev = getenv("DRTHS_COMEDI_EMU_DEVICE");
    snprintf(B.device, sizeof B.device, "%s", dev && *dev ? dev : "/dev/comedi0");
    size_t len = strlen(B.device), k = len;
    while (k > 0 && B.device[k - 1] >= '0' && B.device[k - 1] <= '9')
        k--;
    B.minor = k < len ? (unsigned)atoi(B.device + k) : 0;
    const char *fault = getenv("DRTHS_COMEDI_EMU_FAULT");
    if (fault && *fault)
        parse_fault(fault);
}

static int our_fd(int fd)
{
    for (int i = 0; i < B.n_open; i++)
        if (B.fds[i] == fd)
            return 1;
    return 0;
}

/* ---- instructions --------------------------------------------------------------------------- */

/* The engineering value a wired output holds now. */
static double wired_output(const wire_t *w)
{
    double v = ao_volts(B.ao_range[w->chan], B.ao_code[w->chan]);
    return w->units_per_volt * v + w->offset;
}

static int is_wired(const wire_t *w, unsigned subdev, unsigned chan)
{
    return w->used && w->subdev == subdev && w->chan == chan;
}

/* One tick of the specimen with what the outputs hold. The ideal actuator needs a velocity,
 * which a board does not carry: the difference of the drive over the tick stands in for it. */
static void step_specimen(void)
{
    double drive = wired_output(&B.w[W_COMMAND]);
    double cmd = wired_output(&B.w[W_CURRENT]);
    double vel = (drive - B.last_drive_m) / B.dt_s;
    B.last_drive_m = drive;
    drths_specimen_step(&B.spec, drive, vel, cmd, &B.meas);
}

static double ai_volts(unsigned chan)
{
    if (!isnan(B.ai_forced[chan]))
        return B.ai_forced[chan];
    if (!B.have_spec)
        return 0.0;
    if (is_wired(&B.w[W_DISP], DRTHS_COMEDI_EMU_AI_SUBDEVICE, chan))
        return (B.meas.disp_m - B.w[W_DISP].offset) / B.w[W_DISP].units_per_volt;
    if (is_wired(&B.w[W_FORCE], DRTHS_COMEDI_EMU_AI_SUBDEVICE, chan))
        return (B.meas.force_N - B.w[W_FORCE].offset) / B.w[W_FORCE].units_per_volt;
    return 0.0;
}

static int insn_ai_read(comedi_insn *in, unsigned chan, unsigned rng)
{
    for (unsigned i = 0; i < in->n; i++) {
        if (B.have_spec && is_wired(&B.w[W_DISP], DRTHS_COMEDI_EMU_AI_SUBDEVICE, chan))
            step_specimen();
        lsampl_t code = drths_comedi_emu_ai_code(rng, ai_volts(chan));
        if (B.saturate_at && B.n_data >= B.saturate_at && (int)chan == B.saturate_chan)
            code = MAXDATA;
        in->data[i] = code;
    }
    return (int)in->n;
}

static int insn_ao(comedi_insn *in, unsigned chan, unsigned rng)
{
    if (in->insn == INSN_READ) {
        for (unsigned i = 0; i < in->n; i++)
            in->data[i] = B.ao_code[chan];
        return (int)in->n;
    }
    for (unsigned i = 0; i < in->n; i++)
        if (in->data[i] > MAXDATA)
            return -EINVAL;
    if (in->n > 0) {
        B.ao_code[chan] = in->data[in->n - 1];
        B.ao_range[chan] = rng;
    }
    return (int)in->n;
}

static int insn_dio(comedi_insn *in, unsigned chan)
{
    switch (in->insn) {
    case INSN_BITS:
        if (in->n != 2)
            return -EINVAL;
        B.dio_bits =
            (B.dio_bits & ~(in->data[0] & B.dio_dir)) | (in->data[1] & in->data[0] & B.dio_dir);
        in->data[1] = B.dio_bits & ((1u << DIO_LINES) - 1);
        return 2;
    case INSN_CONFIG:
        if (in->n < 1)
            return -EINVAL;
        switch (in->data[0]) {
        case INSN_CONFIG_DIO_INPUT:
            B.dio_dir &= ~(1u << chan);
            return (int)in->n;
        case INSN_CONFIG_DIO_OUTPUT:
            B.dio_dir |= 1u << chan;
            return (int)in->n;
        case INSN_CONFIG_DIO_QUERY:
            if (in->n < 2)
                return -EINVAL;
            in->data[1] = (B.dio_dir >> chan) & 1u ? COMEDI_OUTPUT : COMEDI_INPUT;
            return (int)in->n;
        default:
            return -EINVAL;
        }
    case INSN_READ:
        for (unsigned i = 0; i < in->n; i++)
            in->data[i] = (B.dio_bits >> chan) & 1u;
        return (int)in->n;
    case INSN_WRITE:
        for (unsigned i = 0; i < in->n; i++) {
            if (in->data[i] > 1)
                return -EINVAL;
            B.dio_bits = (B.dio_bits & ~(1u << chan)) | (in->data[i] << chan);
        }
        return (int)in->n;
    default:
        return -EINVAL;
    }
}

/* One instruction; returns the samples done or a negative errno. */
static int do_insn(comedi_insn *in)
{
    if (in->n > 65536)
        return -EINVAL;
    if (in->insn == INSN_GTOD) {
        if (in->n != 2)
            return -EINVAL;
        struct timeval tv;
        gettimeofday(&tv, NULL);
        in->data[0] = (lsampl_t)tv.tv_sec;
        in->data[1] = (lsampl_t)tv.tv_usec;
        return 2;
    }
    if (in->insn & INSN_MASK_SPECIAL)
        return -EINVAL;
    if (in->subdev >= N_SUBDEVS)
        return -EINVAL;
    const subdev_t *s = &subdevs[in->subdev];
    if (s->type == COMEDI_SUBD_UNUSED)
        return -EIO;
    unsigned chan = CR_CHAN(in->chanspec), rng = CR_RANGE(in->chanspec);
    if (chan >= s->n_chan || rng >= s->n_ranges)
        return -EINVAL;
    if (in->n > 0 && !in->data)
        return -EFAULT;
    if (s->type == COMEDI_SUBD_DIO)
        return insn_dio(in, chan);
    if (in->insn != INSN_READ && in->insn != INSN_WRITE)
        return -EINVAL;
    if (in->insn == INSN_WRITE && !(s->flags & SDF_WRITABLE))
        return -EINVAL;
    B.n_data++;
    if (B.fail_errno && B.n_data >= B.fail_at)
        return -B.fail_errno;
    if (s->type == COMEDI_SUBD_AI)
        return insn_ai_read(in, chan, rng);
    return insn_ao(in, chan, rng);
}

/* ---- information ioctls --------------------------------------------------------------------- */

static unsigned range_type_of(unsigned i)
{
    return (i << 24) | subdevs[i].n_ranges;
}

static int devinfo(comedi_devinfo *d)
{
    memset(d, 0, sizeof *d);
    d->version_code = (0u << 16) | (7u << 8) | 76u; /* comedi 0.7.76: INSN, INSNLIST, SDF_CMD */
    d->n_subdevs = N_SUBDEVS;
    snprintf(d->driver_name, sizeof d->driver_name, "drths_comedi_emu");
    snprintf(d->board_name, sizeof d->board_name, "emu-6221");
    d->read_subdevice = -1;
    d->write_subdevice = -1;
    return 0;
}

static int subdinfo(comedi_subdinfo *s)
{
    memset(s, 0, N_SUBDEVS * sizeof *s);
    for (unsigned i = 0; i < N_SUBDEVS; i++) {
        s[i].type = subdevs[i].type;
        s[i].n_chan = subdevs[i].n_chan;
        s[i].subd_flags = subdevs[i].flags;
        s[i].timer_type = 5;
        s[i].len_chanlist = 0;
        s[i].maxdata = subdevs[i].maxdata;
        s[i].range_type = range_type_of(i);
        s[i].insn_bits_support =
            subdevs[i].type == COMEDI_SUBD_DIO ? COMEDI_SUPPORTED : COMEDI_UNSUPPORTED;
    }
    return 0;
}

static int chaninfo(comedi_chaninfo *c)
{
    if (c->subdev >= N_SUBDEVS)
        return -EINVAL;
    /* Every channel of a subdevice has the same maxdata and ranges (no SDF_MAXDATA or
     * SDF_RANGETYPE), so the lists are not filled, and asking for them is an error. */
    if (c->rangelist || c->maxdata_list)
        return -EINVAL;
    return 0;
}

static int rangeinfo(comedi_rangeinfo *r)
{
    unsigned subd = (r->range_type >> 24) & 0xf;
    if (subd >= N_SUBDEVS || RANGE_LENGTH(r->range_type) != subdevs[subd].n_ranges)
        return -EINVAL;
    if (!r->range_ptr)
        return -EFAULT;
    memcpy(r->range_ptr, subdevs[subd].ranges, subdevs[subd].n_ranges * sizeof(comedi_krange));
    return 0;
}

static int board_ioctl(unsigned long request, void *arg)
{
    if (!arg)
        return -EFAULT;
    /* The kernel takes the request as 32 bits; comedilib passes an int, which the ioctl
     * prototype sign-extends (COMEDI_DEVINFO has bit 31 set). */
    switch ((unsigned int)request) {
    case COMEDI_DEVINFO:
        return devinfo(arg);
    case COMEDI_SUBDINFO:
        return subdinfo(arg);
    case COMEDI_CHANINFO:
        return chaninfo(arg);
    case COMEDI_RANGEINFO:
        return rangeinfo(arg);
    case COMEDI_INSN:
        return do_insn(arg);
    case COMEDI_INSNLIST: {
        comedi_insnlist *il = arg;
        if (il->n_insns > 0 && !il->insns)
            return -EFAULT;
        for (unsigned i = 0; i < il->n_insns; i++) {
            int r = do_insn(&il->insns[i]);
            if (r < 0)
                return r;
        }
        return (int)il->n_insns;
    }
    case COMEDI_LOCK:
    case COMEDI_UNLOCK:
    case COMEDI_CANCEL:
        return 0;
    default:
        return -ENOTTY;
    }
}

/* ---- the libc functions taken over ---------------------------------------------------------- */

EXPORT int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    {
        /* Recursive: loading the experiment may open files through this function. */
        pthread_mutex_lock(&B.lock);
        configure();
        if (strcmp(path, B.device) == 0) {
            int fd = -1, e = 0;
            if (B.n_open >= MAX_FDS) {
                e = EMFILE;
            } else if (!B.have_spec && getenv("DRTHS_COMEDI_EMU_EXPERIMENT") &&
                       *getenv("DRTHS_COMEDI_EMU_EXPERIMENT") &&
                       load_experiment(getenv("DRTHS_COMEDI_EMU_EXPERIMENT")) < 0) {
                e = ENXIO; /* as a device node with no board attached */
            } else {
                /* A real descriptor, so that close and poll behave; the answers are ours. */
                fd = real_open()("/dev/null", O_RDWR | (flags & O_CLOEXEC));
                if (fd < 0)
                    e = errno;
                else
                    B.fds[B.n_open++] = fd;
            }
            pthread_mutex_unlock(&B.lock);
            if (fd < 0)
                errno = e;
            return fd;
        }
        pthread_mutex_unlock(&B.lock);
    }
    return real_open()(path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    return open(path, flags, mode);
}

EXPORT int close(int fd)
{
    pthread_mutex_lock(&B.lock);
    for (int i = 0; i < B.n_open; i++)
        if (B.fds[i] == fd) {
            B.fds[i] = B.fds[--B.n_open];
            break;
        }
    pthread_mutex_unlock(&B.lock);
    return real_close()(fd);
}

EXPORT int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    pthread_mutex_lock(&B.lock);
    if (!our_fd(fd)) {
        pthread_mutex_unlock(&B.lock);
        return real_ioctl()(fd, request, arg);
    }
    int r = board_ioctl(request, arg);
    pthread_mutex_unlock(&B.lock);
    if (r < 0) {
        errno = -r;
        return -1;
    }
    return r;
}

/* comedi_get_default_calibration_path names the file after the device's minor number. */
EXPORT int fstat(int fd, struct stat *st)
{
    pthread_mutex_lock(&B.lock);
    int ours = our_fd(fd);
    unsigned minor = B.minor;
    pthread_mutex_unlock(&B.lock);
    int r = real_fstat()(fd, st);
    if (r == 0 && ours) {
        st->st_mode = S_IFCHR | 0660;
        st->st_rdev = makedev(COMEDI_MAJOR, minor);
    }
    return r;
}

EXPORT int fstat64(int fd, struct stat64 *st)
{
    return fstat(fd, (struct stat *)st);
}

/* ---- control ------------------------------------------------------------------------------- */

EXPORT int drths_comedi_emu_reset(void)
{
    pthread_mutex_lock(&B.lock);
    int r = 0;
    if (B.n_open > 0)
        r = -EBUSY;
    else
        reset_board();
    pthread_mutex_unlock(&B.lock);
    return r;
}

EXPORT void drths_comedi_emu_set_input(unsigned chan, double volts)
{
    pthread_mutex_lock(&B.lock);
    configure();
    if (chan < DRTHS_COMEDI_EMU_AI_CHANNELS)
        B.ai_forced[chan] = volts;
    pthread_mutex_unlock(&B.lock);
}

EXPORT lsampl_t drths_comedi_emu_output_code(unsigned chan)
{
    pthread_mutex_lock(&B.lock);
    configure();
    lsampl_t c = chan < DRTHS_COMEDI_EMU_AO_CHANNELS ? B.ao_code[chan] : 0;
    pthread_mutex_unlock(&B.lock);
    return c;
}

EXPORT void drths_comedi_emu_fail_after(unsigned long n, int errnum)
{
    pthread_mutex_lock(&B.lock);
    configure();
    B.fail_errno = errnum;
    B.fail_at = B.n_data + n + 1;
    pthread_mutex_unlock(&B.lock);
}
