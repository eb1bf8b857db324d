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
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/io.h>
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
