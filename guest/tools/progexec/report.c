// SPDX-License-Identifier: GPL-2.0-or-later
/* progexec's report lines (docs/programs.md, The executor and its channel). */
#include <stdarg.h>

#include "progexec.h"

void pe_finding(struct pe_report *r, const char *check, const char *fmt, ...)
{
	va_list ap;

	fprintf(r->out, "finding %s ", check);
	va_start(ap, fmt);
	vfprintf(r->out, fmt, ap);
	va_end(ap);
	fputc('\n', r->out);
	fflush(r->out);
	r->findings++;
}

void pe_say(struct pe_report *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(r->out, fmt, ap);
	va_end(ap);
	fputc('\n', r->out);
	fflush(r->out);
}
