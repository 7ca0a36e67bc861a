// See include/rain_secret.h. Each function of the list (X: returns a value, V: returns nothing) is
// looked up once with dlsym in libsecret-1.so.0 and the libraries it depends on (GIO, GObject,
// GLib); a missing one fails the load, so a loaded table never holds a NULL. The library is never
// unloaded (GLib's type system cannot be).
#include "rain_secret.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

typedef unsigned long RainGType;  // GType (gsize)
typedef unsigned int (*RainGHashFunc)(const void *key);
typedef int (*RainGEqualFunc)(const void *a, const void *b);
typedef void (*RainGDestroyNotify)(void *data);

enum {
    RAIN_G_BUS_TYPE_SESSION = 2,
    RAIN_SECRET_SERVICE_NONE = 0,
    RAIN_SECRET_COLLECTION_NONE = 0,
    RAIN_SECRET_SEARCH_ALL = 1 << 1,
    RAIN_SECRET_SEARCH_LOAD_SECRETS = 1 << 3,
    RAIN_SECRET_ITEM_CREATE_REPLACE = 1 << 1,
};

#define RAIN_SECRET_FUNCTIONS(X, V)                                                                    \
    V(g_error_free, (RainGError *e), (e))                                                             \
    V(g_free, (void *m), (m))                                                                         \
    V(g_list_free, (RainGList *l), (l))                                                               \
    V(g_object_unref, (RainGObject *o), (o))                                                          \
    X(RainGObject *, g_object_ref, (RainGObject *o), (o))                                             \
    X(RainGObject *, g_cancellable_new, (void), ())                                                   \
    V(g_cancellable_cancel, (RainGObject *c), (c))                                                    \
    X(char *, g_dbus_proxy_get_name_owner, (RainGObject *p), (p))                                     \
    X(int, secret_collection_get_locked, (RainGObject *c), (c))                                       \
    X(int, secret_item_get_locked, (RainGObject *i), (i))                                             \
    X(RainSecretValue *, secret_item_get_secret, (RainGObject *i), (i))                               \
    X(int, secret_item_delete_sync, (RainGObject *i, RainGObject *k, RainGError **e), (i, k, e))      \
    X(RainSecretValue *, secret_value_new, (const char *s, ssize_t n, const char *t), (s, n, t))      \
    X(const char *, secret_value_get, (RainSecretValue *v, size_t *n), (v, n))                        \
    V(secret_value_unref, (RainSecretValue *v), (v))

// Called only by the helpers below, with GLib's own signatures.
#define RAIN_SECRET_INTERNALS(X)                                                                             \
    X(unsigned int, g_str_hash, (const void *k))                                                             \
    X(int, g_str_equal, (const void *a, const void *b))                                                      \
    X(void *, g_hash_table_new_full, (RainGHashFunc h, RainGEqualFunc q, RainGDestroyNotify k, RainGDestroyNotify v)) \
    X(int, g_hash_table_insert, (void *t, void *k, void *v))                                                 \
    X(void, g_hash_table_unref, (void *t))                                                                   \
    X(char *, g_strdup, (const char *s))                                                                     \
    X(RainGObject *, g_bus_get_sync, (int bus, RainGObject *c, RainGError **e))                              \
    X(void, g_dbus_connection_set_exit_on_close, (RainGObject *c, int exit))                                 \
    X(int, g_dbus_connection_is_closed, (RainGObject *c))                                                    \
    X(RainGObject *, secret_service_open_sync,                                                               \
      (RainGType t, const char *name, int flags, RainGObject *c, RainGError **e))                            \
    X(RainGType, secret_service_get_type, (void))                                                            \
    X(RainGObject *, secret_collection_for_alias_sync,                                                       \
      (RainGObject *s, const char *a, int flags, RainGObject *c, RainGError **e))                            \
    X(RainGList *, secret_collection_search_sync,                                                            \
      (RainGObject *s, const void *schema, void *attributes, int flags, RainGObject *c, RainGError **e))     \
    X(RainGObject *, secret_item_create_sync,                                                                \
      (RainGObject *s, const void *schema, void *attributes, const char *label, RainSecretValue *v, int flags, \
       RainGObject *c, RainGError **e))

#define RAIN_SECRET_POINTER(ret, name, params, args) static ret(*p_##name) params;
#define RAIN_SECRET_VOID_POINTER(name, params, args) static void(*p_##name) params;
#define RAIN_SECRET_INTERNAL_POINTER(ret, name, params) static ret(*p_##name) params;
RAIN_SECRET_FUNCTIONS(RAIN_SECRET_POINTER, RAIN_SECRET_VOID_POINTER)
RAIN_SECRET_INTERNALS(RAIN_SECRET_INTERNAL_POINTER)

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const char *load_failure = "libsecret was not loaded";
static char load_message[512];

#define RAIN_SECRET_LOOKUP(ret, name, params, args) RAIN_SECRET_VOID_LOOKUP(name, params, args)
#define RAIN_SECRET_INTERNAL_LOOKUP(ret, name, params) RAIN_SECRET_VOID_LOOKUP(name, params, ())
#define RAIN_SECRET_VOID_LOOKUP(name, params, args)                                                       \
    *(void **)(&p_##name) = dlsym(handle, #name);                                                         \
    if (p_##name == NULL) {                                                                               \
        snprintf(load_message, sizeof load_message, "libsecret-1.so.0 has no %s (too old a libsecret)", #name); \
        load_failure = load_message;                                                                      \
        return;                                                                                           \
    }

static void load(void) {
    void *handle = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        const char *why = dlerror();
        snprintf(load_message, sizeof load_message, "%s", why ? why : "libsecret-1.so.0 could not be loaded");
        load_failure = load_message;
        return;
    }
    RAIN_SECRET_FUNCTIONS(RAIN_SECRET_LOOKUP, RAIN_SECRET_VOID_LOOKUP)
    RAIN_SECRET_INTERNALS(RAIN_SECRET_INTERNAL_LOOKUP)
    load_failure = NULL;
}

const char *rain_secret_load(void) {
    pthread_once(&load_once, load);
    return load_failure;
}

#define RAIN_SECRET_WRAPPER(ret, name, params, args) \
    ret rain_##name params { return p_##name args; }
#define RAIN_SECRET_VOID_WRAPPER(name, params, args) \
    void rain_##name params { p_##name args; }
RAIN_SECRET_FUNCTIONS(RAIN_SECRET_WRAPPER, RAIN_SECRET_VOID_WRAPPER)

RainSecretAttributes *rain_secret_attributes_new(void) {
    return p_g_hash_table_new_full(p_g_str_hash, p_g_str_equal, p_g_free, p_g_free);
}

void rain_secret_attributes_insert(RainSecretAttributes *attributes, const char *name, const char *value) {
    p_g_hash_table_insert(attributes, p_g_strdup(name), p_g_strdup(value));
}

void rain_secret_attributes_unref(RainSecretAttributes *attributes) { p_g_hash_table_unref(attributes); }

RainGObject *rain_secret_service_open(RainGObject *cancellable, int *bus_closed, RainGError **error) {
    *bus_closed = 0;
    RainGObject *bus = p_g_bus_get_sync(RAIN_G_BUS_TYPE_SESSION, cancellable, error);
    if (bus == NULL) return NULL;
    p_g_dbus_connection_set_exit_on_close(bus, 0);
    RainGObject *service = NULL;
    if (p_g_dbus_connection_is_closed(bus)) {
        *bus_closed = 1;
    } else {
        service = p_secret_service_open_sync(
            p_secret_service_get_type(), NULL, RAIN_SECRET_SERVICE_NONE, cancellable, error);
    }
    p_g_object_unref(bus);
    return service;
}

RainGObject *rain_secret_collection_for_alias_sync(
    RainGObject *service, const char *alias, RainGObject *cancellable, RainGError **error) {
    return p_secret_collection_for_alias_sync(service, alias, RAIN_SECRET_COLLECTION_NONE, cancellable, error);
}

RainGList *rain_secret_collection_search_sync(
    RainGObject *collection, RainSecretAttributes *attributes, int load_secrets, RainGObject *cancellable,
    RainGError **error) {
    int flags = RAIN_SECRET_SEARCH_ALL | (load_secrets ? RAIN_SECRET_SEARCH_LOAD_SECRETS : 0);
    return p_secret_collection_search_sync(collection, NULL, attributes, flags, cancellable, error);
}

RainGObject *rain_secret_item_create_sync(
    RainGObject *collection, RainSecretAttributes *attributes, const char *label, RainSecretValue *value,
    RainGObject *cancellable, RainGError **error) {
    return p_secret_item_create_sync(
        collection, NULL, attributes, label, value, RAIN_SECRET_ITEM_CREATE_REPLACE, cancellable, error);
}
