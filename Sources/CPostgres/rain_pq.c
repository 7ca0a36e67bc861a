// See include/rain_pq.h. Each function of the list (X: returns a value, V: returns nothing) is
// looked up once with dlsym; a missing one fails the load (a libpq too old), so a loaded table
// never holds a NULL.
#include "rain_pq.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define RAIN_PQ_FUNCTIONS(X, V)                                                                          \
    X(PGconn *, PQconnectdbParams, (const char *const *k, const char *const *v, int e), (k, v, e))   \
    X(ConnStatusType, PQstatus, (const PGconn *c), (c))                                              \
    X(char *, PQerrorMessage, (const PGconn *c), (c))                                                \
    V(PQfinish, (PGconn *c), (c))                                                                    \
    X(PQconninfoOption *, PQconninfoParse, (const char *s, char **e), (s, e))                        \
    V(PQfreemem, (void *p), (p))                                                                     \
    V(PQconninfoFree, (PQconninfoOption *o), (o))                                                    \
    X(PGresult *, PQexec, (PGconn *c, const char *q), (c, q))                                        \
    V(PQclear, (PGresult *r), (r))                                                                   \
    X(PGTransactionStatusType, PQtransactionStatus, (const PGconn *c), (c))                          \
    V(PQreset, (PGconn *c), (c))                                                                     \
    X(PGresult *, PQprepare, (PGconn *c, const char *n, const char *q, int np, const Oid *t),        \
      (c, n, q, np, t))                                                                              \
    X(PGresult *, PQexecPrepared,                                                                    \
      (PGconn *c, const char *n, int np, const char *const *v, const int *l, const int *f, int rf),  \
      (c, n, np, v, l, f, rf))                                                                       \
    X(ExecStatusType, PQresultStatus, (const PGresult *r), (r))                                      \
    X(char *, PQcmdTuples, (PGresult *r), (r))                                                       \
    X(int, PQntuples, (const PGresult *r), (r))                                                      \
    X(int, PQnfields, (const PGresult *r), (r))                                                      \
    X(int, PQgetisnull, (const PGresult *r, int row, int col), (r, row, col))                        \
    X(int, PQgetlength, (const PGresult *r, int row, int col), (r, row, col))                        \
    X(char *, PQgetvalue, (const PGresult *r, int row, int col), (r, row, col))                      \
    X(Oid, PQftype, (const PGresult *r, int col), (r, col))                                          \
    X(char *, PQresultErrorField, (const PGresult *r, int code), (r, code))                          \
    X(int, PQsocket, (const PGconn *c), (c))                                                         \
    X(int, PQconsumeInput, (PGconn *c), (c))                                                         \
    X(PGnotify *, PQnotifies, (PGconn *c), (c))

#define RAIN_PQ_POINTER(ret, name, params, args) static ret(*p_##name) params;
#define RAIN_PQ_VOID_POINTER(name, params, args) static void(*p_##name) params;
RAIN_PQ_FUNCTIONS(RAIN_PQ_POINTER, RAIN_PQ_VOID_POINTER)

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libpq was not loaded";
static char load_message[512];

#define RAIN_PQ_LOOKUP(ret, name, params, args) RAIN_PQ_VOID_LOOKUP(name, params, args)
#define RAIN_PQ_VOID_LOOKUP(name, params, args)                                                       \
    *(void **)(&p_##name) = dlsym(handle, #name);                                                     \
    if (p_##name == NULL) {                                                                           \
        snprintf(load_message, sizeof load_message, "libpq.so.5 has no %s (too old a libpq)", #name);  \
        load_failure = load_message;                                                                  \
        return;                                                                                       \
    }

static void load(void) {
    void *handle = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(load_message, sizeof load_message, "%s", why ? why : "libpq.so.5 could not be loaded");
        load_failure = load_message;
        return;
    }
    RAIN_PQ_FUNCTIONS(RAIN_PQ_LOOKUP, RAIN_PQ_VOID_LOOKUP)
    load_failure = NULL;
}

const char *rain_pq_load(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

#define RAIN_PQ_WRAPPER(ret, name, params, args) \
    ret rain_##name params { return p_##name args; }
#define RAIN_PQ_VOID_WRAPPER(name, params, args) \
    void rain_##name params { p_##name args; }
RAIN_PQ_FUNCTIONS(RAIN_PQ_WRAPPER, RAIN_PQ_VOID_WRAPPER)
