// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * fwcfg: print one named QEMU fw_cfg file on stdout.
 *
 *   fwcfg NAME        e.g. fwcfg opt/faultline/run.sh
 *
 * Exit 0: printed; 1: no such file (yet); 2: no fw_cfg access.
 *
 * A restored run (faultline run --restore) gets its /run.sh this way: the
 * saved guest waits in init, and the restored QEMU carries the run's script
 * as `-fw_cfg name=opt/faultline/run.sh` (fw_cfg contents are not part of
 * the migration stream, its directory is read afresh here).  The legacy
 * port interface (selector 0x510, data 0x511) needs no kernel driver, so
 * any guest kernel with ioperm() can read it, and a read is synchronous
 * with the vCPU: the same bytes at the same instruction in every
 * deterministic run.
 *
 * A kernel without ioperm() (CONFIG_X86_IOPL_IOPERM off, as in kernels
 * built by `faultline kernel build`: turning it on recompiles nearly
 * everything) is read through the qemu_fw_cfg driver's sysfs instead
 * (CONFIG_FW_CFG_SYSFS).  The driver lists fw_cfg's files once, when it
 * binds; a file that appeared since (the restored QEMU's) is seen after
 * the driver is unbound and bound again.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/io.h>
#include <sys/stat.h>
#include <unistd.h>

#define FW_CFG_PORT_SEL  0x510
#define FW_CFG_PORT_DATA 0x511
#define FW_CFG_SIGNATURE 0x00
#define FW_CFG_FILE_DIR  0x19

static void fw_select(uint16_t key)
{
    outw(key, FW_CFG_PORT_SEL);
}

static void fw_read(void *buf, size_t len)
{
    uint8_t *p = buf;

    while (len--) {
        *p++ = inb(FW_CFG_PORT_DATA);
    }
}

#define SYSFS_FW_CFG "/sys/firmware/qemu_fw_cfg"
#define SYSFS_DRIVER "/sys/bus/platform/drivers/fw_cfg"

/* Copy file @path to stdout: 0, or 2 on an error. */
static int copy_out(const char *path)
{
    char buf[4096];
    ssize_t n;
    int fd = open(path, O_RDONLY);

    if (fd < 0) {
        perror(path);
        return 2;
    }
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        if (fwrite(buf, 1, n, stdout) != (size_t)n) {
            perror("fwcfg: write");
            close(fd);
            return 2;
        }
    }
    if (n < 0) {
        perror(path);
    }
    close(fd);
    return n < 0 || fflush(stdout) ? 2 : 0;
}

static int write_str(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY);
    ssize_t n;

    if (fd < 0) {
        return -1;
    }
    n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/*
 * Bind the fw_cfg driver to its device again, so that it lists the files
 * fw_cfg has now.  The device is the entry of the driver's directory that
 * is a device (it has a driver link; its name depends on the firmware:
 * ACPI's QEMU0002:00 on q35).  0, or -1 with nothing to rebind.
 */
static int rebind(void)
{
    DIR *d = opendir(SYSFS_DRIVER);
    struct dirent *e;
    char dev[256] = "", path[512];
    struct stat st;

    if (!d) {
        return -1;
    }
    while ((e = readdir(d))) {
        snprintf(path, sizeof(path), SYSFS_DRIVER "/%s/driver", e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0) {
            snprintf(dev, sizeof(dev), "%s", e->d_name);
            break;
        }
    }
    closedir(d);
    if (!dev[0]) {
        return -1;
    }
    if (write_str(SYSFS_DRIVER "/unbind", dev) < 0) {
        perror("fwcfg: unbind");
        return -1;
    }
    if (write_str(SYSFS_DRIVER "/bind", dev) < 0) {
        perror("fwcfg: bind");
        return -1;
    }
    return 0;
}

/* The sysfs way (no ioperm): 0 printed, 1 not there yet, 2 no access. */
static int read_sysfs(const char *name)
{
    char path[512];

    snprintf(path, sizeof(path), SYSFS_FW_CFG "/by_name/%s/raw", name);
    if (access(path, R_OK) == 0) {
        return copy_out(path);
    }
    if (access(SYSFS_FW_CFG, F_OK) < 0) {
        fprintf(stderr, "fwcfg: no ioperm() and no %s (CONFIG_FW_CFG_SYSFS)\n",
                SYSFS_FW_CFG);
        return 2;
    }
    if (rebind() < 0) {
        fprintf(stderr, "fwcfg: cannot bind the fw_cfg driver again\n");
        return 2;
    }
    return access(path, R_OK) == 0 ? copy_out(path) : 1;
}

int main(int argc, char **argv)
{
    struct {
        uint32_t size;
        uint16_t select;
        uint16_t reserved;
        char name[56];
    } f;
    uint32_t count, i;
    char sig[4], buf[4096];

    if (argc != 2) {
        fprintf(stderr, "usage: fwcfg NAME\n");
        return 2;
    }
    if (ioperm(FW_CFG_PORT_SEL, 2, 1) < 0) {
        if (errno == ENOSYS) {
            return read_sysfs(argv[1]);
        }
        perror("fwcfg: ioperm");
        return 2;
    }
    fw_select(FW_CFG_SIGNATURE);
    fw_read(sig, sizeof(sig));
    if (memcmp(sig, "QEMU", 4)) {
        fprintf(stderr, "fwcfg: no QEMU fw_cfg at 0x%x\n", FW_CFG_PORT_SEL);
        return 2;
    }
    fw_select(FW_CFG_FILE_DIR);
    fw_read(&count, sizeof(count));
    count = ntohl(count);
    for (i = 0; i < count; i++) {
        fw_read(&f, sizeof(f));
        f.name[sizeof(f.name) - 1] = '\0';
        if (strcmp(f.name, argv[1])) {
            continue;
        }
        fw_select(ntohs(f.select));
        for (uint32_t left = ntohl(f.size); left;) {
            size_t n = left < sizeof(buf) ? left : sizeof(buf);

            fw_read(buf, n);
            if (fwrite(buf, 1, n, stdout) != n) {
                perror("fwcfg: write");
                return 2;
            }
            left -= n;
        }
        return fflush(stdout) ? 2 : 0;
    }
    return 1;
}
