/*
 * stddef.h — minimal freestanding size_t, ptrdiff_t, NULL and offsetof for wakeful guests
 * (sdk.md §1, extension).
 */
#ifndef WAKEFUL_STDDEF_H
#define WAKEFUL_STDDEF_H

typedef unsigned long size_t;
typedef long ptrdiff_t;
typedef int wchar_t;

#ifndef NULL
#define NULL ((void *)0)
#endif

#define offsetof(type, member) __builtin_offsetof(type, member)

#endif /* WAKEFUL_STDDEF_H */
