/* Allocation counting for the zero-allocation tests (after activation a site never allocates). Included once by a test
 * program, it interposes malloc, calloc, realloc and free (glibc exports the real ones as
 * __libc_*), so every allocator call in the process (ours, libsodium's, msgpack-c's) adds one
 * to alloc_count: a test reads it before and after the per-tick calls it proves allocation-free.
 * A free counts too, since a steady state that frees has allocated somewhere.
 * Sanitizer builds bring their own allocator: there COUNT_ALLOCS is 0, nothing is interposed
 * and the tests skip the count (saying so). */
#ifndef DRTHS_TESTS_ALLOC_COUNT_H
#define DRTHS_TESTS_ALLOC_COUNT_H

#include <stdatomic.h>
#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define COUNT_ALLOCS 0
#endif
#endif
#ifndef COUNT_ALLOCS
#define COUNT_ALLOCS 1
#endif

/* Allocator calls so far, from any thread. */
static atomic_long alloc_count __attribute__((unused));

#if COUNT_ALLOCS
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
    atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    return __libc_realloc(p, n);
}
void free(void *p)
{
    if (p)
        atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
    __libc_free(p);
}
#endif

#endif
