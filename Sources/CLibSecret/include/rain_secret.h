// libsecret (the freedesktop Secret Service over D-Bus), loaded when first needed instead of
// linked: a daemon on the file or TPM provider never maps libsecret, GIO, GObject and GLib (and
// SwiftPM never sees libsecret-1.pc's -pthread flag).
//
// Only what RainKeyStore calls is declared here, with its own names and opaque types, so no GLib
// header is needed to build. Call rain_secret_load() first; it returns NULL once libsecret-1.so.0
// (which brings libgio, libgobject and libglib) is loaded with every function below, or a message
// saying why it could not be. The other functions call the libsecret or GLib function of the
// same name without the rain_ prefix, except where a comment says what they do instead.
#ifndef RAIN_SECRET_H
#define RAIN_SECRET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/// GLib's GError: a domain (a GQuark), a code and a message.
typedef struct RainGError {
    uint32_t domain;
    int code;
    char *message;
} RainGError;

/// GLib's GList node.
typedef struct RainGList {
    void *data;
    struct RainGList *next;
    struct RainGList *prev;
} RainGList;

/// Any GObject: a GDBusConnection, SecretService, SecretCollection, SecretItem or GCancellable.
typedef struct RainGObject RainGObject;
/// libsecret's SecretValue.
typedef struct RainSecretValue RainSecretValue;
/// A GHashTable of attribute names to values (both strings, owned by the table).
typedef struct RainSecretAttributes RainSecretAttributes;

/// Loads libsecret once (thread-safe). NULL on success, else why it failed (a static string).
const char *rain_secret_load(void);

void rain_g_error_free(RainGError *error);
void rain_g_free(void *memory);
void rain_g_list_free(RainGList *list);
void rain_g_object_unref(RainGObject *object);
RainGObject *rain_g_object_ref(RainGObject *object);

RainGObject *rain_g_cancellable_new(void);
/// Thread-safe: the watchdog that bounds a call cancels from another thread.
void rain_g_cancellable_cancel(RainGObject *cancellable);

/// An empty attribute table (g_hash_table_new_full over g_str_hash and g_str_equal, freeing both).
RainSecretAttributes *rain_secret_attributes_new(void);
/// Inserts copies (g_strdup) of `name` and `value`.
void rain_secret_attributes_insert(RainSecretAttributes *attributes, const char *name, const char *value);
void rain_secret_attributes_unref(RainSecretAttributes *attributes);

/// A SecretService proxy for org.freedesktop.secrets on this process's session bus
/// (secret_service_open_sync: a new proxy, no session opened, no collections loaded).
///
/// libsecret always uses GDBus's shared session-bus connection (read from DBUS_SESSION_BUS_ADDRESS
/// when it is first made); this takes it first (g_bus_get_sync) and turns its exit-on-close off, so
/// a session bus that goes away never ends the process. NULL with `*bus_closed` set when that
/// shared connection is already closed (the bus went away earlier).
RainGObject *rain_secret_service_open(RainGObject *cancellable, int *bus_closed, RainGError **error);
/// The unique name owning the proxy's well-known name, or NULL when nobody owns it (free with
/// rain_g_free).
char *rain_g_dbus_proxy_get_name_owner(RainGObject *proxy);

/// The collection at `alias` (flags SECRET_COLLECTION_NONE), or NULL with no error when the alias
/// is not set.
RainGObject *rain_secret_collection_for_alias_sync(
    RainGObject *service, const char *alias, RainGObject *cancellable, RainGError **error);
int rain_secret_collection_get_locked(RainGObject *collection);

/// The collection's items matching `attributes` (no schema; SECRET_SEARCH_ALL, plus
/// SECRET_SEARCH_LOAD_SECRETS when `load_secrets`; never SECRET_SEARCH_UNLOCK, which may prompt).
RainGList *rain_secret_collection_search_sync(
    RainGObject *collection, RainSecretAttributes *attributes, int load_secrets, RainGObject *cancellable,
    RainGError **error);
int rain_secret_item_get_locked(RainGObject *item);
RainSecretValue *rain_secret_item_get_secret(RainGObject *item);
/// Creates the item, replacing one with the same attributes (no schema; SECRET_ITEM_CREATE_REPLACE).
RainGObject *rain_secret_item_create_sync(
    RainGObject *collection, RainSecretAttributes *attributes, const char *label, RainSecretValue *value,
    RainGObject *cancellable, RainGError **error);
int rain_secret_item_delete_sync(RainGObject *item, RainGObject *cancellable, RainGError **error);

/// A value holding a copy of `length` bytes of `secret` (in libsecret's non-pageable memory, wiped
/// when freed).
RainSecretValue *rain_secret_value_new(const char *secret, ssize_t length, const char *content_type);
const char *rain_secret_value_get(RainSecretValue *value, size_t *length);
void rain_secret_value_unref(RainSecretValue *value);

#endif
