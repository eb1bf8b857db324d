// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * progexec's environment on the build host, changing nothing on it: the swap
 * header against util-linux's mkswap and blkid, the sysfs choice and
 * /proc/crypto parsers, the knob map, and pe_env_check's refusals read from
 * this host's own sysfs (a knob value or file it lacks, a device not here).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env-internal.h"
#include "guestlib.h"

static int n_tests, n_failed;

static void ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void ok(int cond, const char *fmt, ...)
{
	va_list ap;

	n_tests++;
	n_failed += !cond;
	printf("%s %d ", cond ? "ok" : "not ok", n_tests);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

static uint32_t le32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A sparse file of @size bytes with @page (4096 bytes) at its start. */
static int make_file(char *path, uint64_t size, const uint8_t *page)
{
	int fd = mkstemp(path);

	if (fd < 0 || ftruncate(fd, (off_t)size) || (page && pwrite(fd, page, PE_PAGE, 0) != PE_PAGE))
		return -1;
	close(fd);
	return 0;
}

static int run_out(const char *cmd, char *out, size_t len)
{
	FILE *p = popen(cmd, "r");
	size_t n;

	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	return pclose(p);
}

static void swap_header(void)
{
	const uint64_t size = 96ull << 20;
	static uint8_t ours[PE_PAGE], theirs[PE_PAGE];
	char a[] = "/tmp/pe-swap-oursXXXXXX", b[] = "/tmp/pe-swap-mkswapXXXXXX";
	char cmd[256], out[512];
	int same = 1, fd;

	ok(env_swap_header(ours, 9 * PE_PAGE) == -EINVAL, "a 9-page area is refused (mkswap's floor is 10)");
	ok(env_swap_header(ours, 10 * PE_PAGE + 100) == 0 && le32(ours + 1028) == 9,
	   "last_page of 10 pages and a bit is 9");
	ok(env_swap_header(ours, size) == 0, "a 96M header");
	ok(le32(ours + 1024) == 1 && le32(ours + 1028) == size / PE_PAGE - 1 &&
	   le32(ours + 1032) == 0, "version 1, last_page %u, no bad pages", le32(ours + 1028));
	ok(!memcmp(ours + PE_PAGE - 10, "SWAPSPACE2", 10), "SWAPSPACE2 ends the page");

	/* mkswap's header of the same size: equal but for its UUID (1036..1051). */
	if (make_file(a, size, ours) || make_file(b, size, NULL)) {
		ok(0, "temporary files in /tmp: %s", strerror(errno));
		return;
	}
	snprintf(cmd, sizeof(cmd), "mkswap %s >/dev/null 2>&1", b);
	if (system(cmd) != 0) {
		printf("ok %d # SKIP mkswap failed\n", ++n_tests);
	} else {
		fd = open(b, O_RDONLY);
		if (fd < 0 || pread(fd, theirs, PE_PAGE, 0) != PE_PAGE)
			same = 0;
		if (fd >= 0)
			close(fd);
		for (int i = 0; i < PE_PAGE && same; i++)
			if (!(i >= 1036 && i < 1052) && ours[i] != theirs[i]) {
				ok(0, "byte %d: ours %#x, mkswap's %#x", i, ours[i], theirs[i]);
				same = 0;
			}
		if (same)
			ok(1, "every byte but the UUID is mkswap's");
	}
	snprintf(cmd, sizeof(cmd), "blkid -p -o export %s 2>&1", a);
	ok(run_out(cmd, out, sizeof(out)) == 0 && strstr(out, "\nTYPE=swap\n") &&
	   strstr(out, "\nVERSION=1\n"), "blkid -p sees swap version 1");
	unlink(a);
	unlink(b);
}

static void choices(void)
{
	char cur[32];

	ok(env_choice_parse("always [madvise] never", "never", cur, sizeof(cur)) == 0 &&
	   !strcmp(cur, "madvise"), "never is offered, madvise is current");
	ok(env_choice_parse("always [madvise] never", "defer", cur, sizeof(cur)) == -EINVAL,
	   "defer is not offered by THP enabled");
	ok(env_choice_parse("always within_size advise [never] deny force", "within_size", cur,
			    sizeof(cur)) == 0 && !strcmp(cur, "never"), "shmem_enabled's words");
	ok(env_choice_parse("always inherit madvise [never]", "[never]", cur, sizeof(cur)) ==
	   -EINVAL, "a bracketed word is matched without its brackets");
	ok(env_choice_parse("cpu memory pids", "memory", cur, sizeof(cur)) == 0 &&
	   !strcmp(cur, "cpu memory pids"), "a plain list: the whole text is current");
}

static void crypto(void)
{
	const char *text =
		"name         : crc32c\ndriver       : crc32c-generic\ntype         : shash\n\n"
		"name         : lz4\ndriver       : lz4-scomp\ntype         : scomp\n\n"
		"name         : lzo\ndriver       : lzo-generic\ntype         : compression\n\n"
		"name         : deflate\ndriver       : deflate-acomp\ntype         : acomp\n";

	ok(env_crypto_has_compressor(text, "lz4") && env_crypto_has_compressor(text, "lzo") &&
	   env_crypto_has_compressor(text, "deflate"), "scomp, compression and acomp count");
	ok(!env_crypto_has_compressor(text, "crc32c"), "a hash is not a compressor");
	ok(!env_crypto_has_compressor(text, "zstd"), "zstd is not listed");
}

static void knob_paths(void)
{
	static const char *const map[][2] = {
		{ "zswap.enabled", "/sys/module/zswap/parameters/enabled" },
		{ "zswap.accept_threshold_percent", "/sys/module/zswap/parameters/accept_threshold_percent" },
		{ "zswap.zpool", "/sys/module/zswap/parameters/zpool" },
		{ "vm.page-cluster", "/proc/sys/vm/page-cluster" },
		{ "vm.swappiness", "/proc/sys/vm/swappiness" },
		{ "thp.shmem_enabled", "/sys/kernel/mm/transparent_hugepage/shmem_enabled" },
		{ "mthp.64kB.enabled", "/sys/kernel/mm/transparent_hugepage/hugepages-64kB/enabled" },
	};
	static const char *const bad[] = {
		"zswap.same_filled_pages_enabled", "vm.dirty_ratio", "thp.khugepaged",
		"mthp.64kB.enabledx", "mthp.64KB.enabled", "mthp.kB.enabled",
	};
	char path[160];

	for (size_t i = 0; i < sizeof(map) / sizeof(*map); i++)
		ok(env_knob_path(map[i][0], path, sizeof(path)) == 0 && !strcmp(path, map[i][1]),
		   "%s -> %s", map[i][0], map[i][1]);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ok(env_knob_path(bad[i], path, sizeof(path)) == -EINVAL, "%s is not a knob", bad[i]);
}

/* pe_env_check reads this host's sysfs; nothing it checks is written (a
 * choice file is judged by its words, not tried). */
static void host_checks(void)
{
	static struct pe_env e;
	char text[256], cur[32];
	int err;

	if (gl_read_file("/sys/kernel/mm/transparent_hugepage/enabled", text, sizeof(text)) == 0) {
		env_choice_parse(text, "", cur, sizeof(cur));
		memset(&e, 0, sizeof(e));
		e.nknob = 1;
		snprintf(e.knob[0].key, sizeof(e.knob[0].key), "thp.enabled");
		snprintf(e.knob[0].value, sizeof(e.knob[0].value), "%s", cur);
		ok(pe_env_check(&e) == 0, "thp.enabled=%s (this host's current) passes: %s", cur, e.why);
		snprintf(e.knob[0].value, sizeof(e.knob[0].value), "sometimes");
		err = pe_env_check(&e);
		ok(err == -EINVAL && strstr(e.why, "thp.enabled=sometimes"),
		   "thp.enabled=sometimes is refused: %s", e.why);
	}
	memset(&e, 0, sizeof(e));
	e.nknob = 1;
	snprintf(e.knob[0].key, sizeof(e.knob[0].key), "mthp.4096kB.enabled");
	snprintf(e.knob[0].value, sizeof(e.knob[0].value), "always");
	ok(pe_env_check(&e) == -ENOENT && strstr(e.why, "hugepages-4096kB"),
	   "an mTHP size no x86 kernel has is refused: %s", e.why);

	memset(&e, 0, sizeof(e));
	e.nswap = 1;
	snprintf(e.swap[0].name, sizeof(e.swap[0].name), "s0");
	snprintf(e.swap[0].kind, sizeof(e.swap[0].kind), "nvme");
	e.swap[0].size = 1 << 20;
	if (access("/proc/swaps", R_OK) == 0) {
		ok(pe_env_check(&e) == -ENODEV && strstr(e.why, "bind s0"),
		   "an unbound device is refused: %s", e.why);
		snprintf(e.swap[0].target, sizeof(e.swap[0].target), "nvme:no-such-serial-here");
		ok(pe_env_check(&e) == -ENODEV && strstr(e.why, "no nvme device"),
		   "a serial not in the machine is refused: %s", e.why);
		snprintf(e.swap[0].target, sizeof(e.swap[0].target), "virtio-blk:x");
		ok(pe_env_check(&e) == -EINVAL && strstr(e.why, "a nvme device bound to"),
		   "a target of another kind is refused: %s", e.why);
	}

	memset(&e, 0, sizeof(e));
	e.ncg = 1;
	snprintf(e.cg[0].name, sizeof(e.cg[0].name), "g");
	e.cg[0].nlimits = 1;
	snprintf(e.cg[0].key[0], sizeof(e.cg[0].key[0]), "memory.no_such_limit");
	snprintf(e.cg[0].value[0], sizeof(e.cg[0].value[0]), "max");
	ok(pe_env_check(&e) == -ENOENT &&
	   (strstr(e.why, "lacks memory.no_such_limit") || strstr(e.why, "no memory controller")),
	   "a limit file the kernel lacks is refused: %s", e.why);
}

static void swaps(void)
{
	int err;

	ok(env_swaps_used_kb(NULL) >= 0, "swap in use: %lld kB", env_swaps_used_kb(NULL));
	ok(env_swaps_used_kb("/dev/no-such-swap") == -1, "a device not listed is -1");
	/* The child's swapoff(2) answer comes back as its errno. */
	err = env_swapoff_timed("/no/such/file", 5);
	ok(err == -ENOENT || err == -EPERM, "swapoff of a missing file in a child: %s",
	   strerrorname_np(-err) ? strerrorname_np(-err) : "?");
}

int main(void)
{
	printf("TAP version 13\n");
	swap_header();
	choices();
	crypto();
	knob_paths();
	host_checks();
	swaps();
	printf("1..%d\n", n_tests);
	return n_failed ? 1 : 0;
}
