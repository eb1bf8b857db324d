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
 * the migration stream: the restored QEMU's own are read).  The saved QEMU
 * carries a placeholder of that name, FWCFG_SIZE bytes starting with
 * PLACEHOLDER: it reads as "not there yet", and it gives the file its
 * fw_cfg key and a size no run.sh exceeds (the launcher checks).
 *
 * Two ways in:
 * - the legacy port interface (selector 0x510, data 0x511) needs no kernel
 *   driver, only ioperm(), and a read is synchronous with the vCPU: the
 *   same bytes at the same instruction in every deterministic run;
 * - a kernel without ioperm() (CONFIG_X86_IOPL_IOPERM off, as in kernels
 *   built by `faultline kernel build`: switching it recompiles nearly
 *   everything) is read through the qemu_fw_cfg driver's sysfs
 *   (CONFIG_FW_CFG_SYSFS).  The driver lists the files once, at boot, with
 *   the saved QEMU's sizes: the placeholder's size covers the run.sh, and
 *   fw_cfg reads zeros past a file's end, which are dropped here.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <unistd.h>

#define FW_CFG_PORT_SEL  0x510
#define FW_CFG_PORT_DATA 0x511
#define FW_CFG_SIGNATURE 0x00
#define FW_CFG_FILE_DIR  0x19

/* As python/faultline/restore.py's FWCFG_PLACEHOLDER and FWCFG_SIZE. */
#define PLACEHOLDER "#faultline: no run.sh yet"
#define FWCFG_SIZE  65536

#define SYSFS_BY_NAME "/sys/firmware/qemu_fw_cfg/by_name"

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

/* Whether the first bytes @buf (@len of them) are the placeholder's. */
static int is_placeholder(const char *buf, size_t len)
{
    return len >= strlen(PLACEHOLDER) && !memcmp(buf, PLACEHOLDER, strlen(PLACEHOLDER));
}

/* Print file contents @buf of @len bytes: 0, or 2 on an error. */
static int emit(const char *buf, size_t len)
{
    while (len && buf[len - 1] == '\0') {
        len--;
    }
    if (fwrite(buf, 1, len, stdout) != len || fflush(stdout)) {
        perror("fwcfg: write");
        return 2;
    }
    return 0;
}

/* The port way: 0 printed, 1 not there (yet), 2 no access. */
static int read_ports(const char *name)
{
    struct {
        uint32_t size;
        uint16_t select;
        uint16_t reserved;
        char name[56];
    } f;
    uint32_t count, i, size, head;
    char sig[4], *buf;
    int ret;

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
        if (strcmp(f.name, name)) {
            continue;
        }
        size = ntohl(f.size);
        if (size > FWCFG_SIZE) {
            fprintf(stderr, "fwcfg: %s: %u bytes, more than %d\n", name, size, FWCFG_SIZE);
            return 2;
        }
        buf = malloc(size + 1);
        if (!buf) {
            perror("fwcfg: malloc");
            return 2;
        }
        fw_select(ntohs(f.select));
        /* The placeholder is polled for: its head is enough to know it. */
        head = size < strlen(PLACEHOLDER) ? size : strlen(PLACEHOLDER);
        fw_read(buf, head);
        if (is_placeholder(buf, head)) {
            free(buf);
            return 1;
        }
        fw_read(buf + head, size - head);
        ret = emit(buf, size);
        free(buf);
        return ret;
    }
    return 1;
}

/* The sysfs way (no ioperm): 0 printed, 1 not there (yet), 2 no access. */
static int read_sysfs(const char *name)
{
    static char buf[FWCFG_SIZE];
    char path[512];
    size_t len = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), SYSFS_BY_NAME "/%s/raw", name);
    fd = open(path, O_RDONLY);
    if (fd < 0) {
        if (errno == ENOENT && access(SYSFS_BY_NAME, F_OK) == 0) {
            return 1;
        }
        fprintf(stderr, "fwcfg: no ioperm() and %s: %s (CONFIG_FW_CFG_SYSFS?)\n",
                path, strerror(errno));
        return 2;
    }
    /* The placeholder is polled for: its head is enough to know it. */
    while (len < strlen(PLACEHOLDER) &&
           (n = read(fd, buf + len, strlen(PLACEHOLDER) - len)) > 0) {
        len += n;
    }
    if (is_placeholder(buf, len)) {
        close(fd);
        return 1;
    }
    while (len < sizeof(buf) && (n = read(fd, buf + len, sizeof(buf) - len)) > 0) {
        len += n;
    }
    close(fd);
    return emit(buf, len);
}

int main(int argc, char **argv)
{
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
    return read_ports(argv[1]);
}
