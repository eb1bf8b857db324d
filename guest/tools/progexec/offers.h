/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What this kernel and machine offer a program (offers.c). */
#ifndef PE_OFFERS_H
#define PE_OFFERS_H

#include <stddef.h>

/* The `offers KEY VALUE...` lines, each ending in '\n', into @buf (lines
 * that do not fit are left out); how many there are. */
int pe_offers(char *buf, size_t len);

#endif /* PE_OFFERS_H */
