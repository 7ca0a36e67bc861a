// libpq, loaded when first needed instead of linked: a daemon on the SQLite store never maps
// libpq and its dependencies (Kerberos, LDAP, GnuTLS: megabytes of resident memory).
//
// The types and constants come from libpq-fe.h. Call rain_pq_load() first; it returns NULL once
// libpq.so.5 is loaded with every function below, or a message saying why it could not be. The
// rain_PQ* functions then call libpq's PQ* functions of the same name. (The PQ* declarations of
// libpq-fe.h are visible too, but nothing links them: calling one fails at link time.)
#ifndef RAIN_PQ_H
#define RAIN_PQ_H

#include <postgresql/libpq-fe.h>

/// Loads libpq once (thread-safe). NULL on success, else why it failed (a static string).
const char *rain_pq_load(void);

PGconn *rain_PQconnectdbParams(const char *const *keywords, const char *const *values, int expand_dbname);
ConnStatusType rain_PQstatus(const PGconn *conn);
char *rain_PQerrorMessage(const PGconn *conn);
void rain_PQfinish(PGconn *conn);
PQconninfoOption *rain_PQconninfoParse(const char *conninfo, char **errmsg);
void rain_PQfreemem(void *ptr);
void rain_PQconninfoFree(PQconninfoOption *options);
PGresult *rain_PQexec(PGconn *conn, const char *query);
void rain_PQclear(PGresult *res);
PGTransactionStatusType rain_PQtransactionStatus(const PGconn *conn);
void rain_PQreset(PGconn *conn);
PGresult *rain_PQprepare(PGconn *conn, const char *name, const char *query, int nParams, const Oid *paramTypes);
PGresult *rain_PQexecPrepared(
    PGconn *conn, const char *name, int nParams, const char *const *paramValues, const int *paramLengths,
    const int *paramFormats, int resultFormat);
ExecStatusType rain_PQresultStatus(const PGresult *res);
char *rain_PQcmdTuples(PGresult *res);
int rain_PQntuples(const PGresult *res);
int rain_PQnfields(const PGresult *res);
int rain_PQgetisnull(const PGresult *res, int row, int column);
int rain_PQgetlength(const PGresult *res, int row, int column);
char *rain_PQgetvalue(const PGresult *res, int row, int column);
Oid rain_PQftype(const PGresult *res, int column);
char *rain_PQresultErrorField(const PGresult *res, int fieldcode);
// LISTEN/NOTIFY (pushed revocations across authority instances).
int rain_PQsocket(const PGconn *conn);
int rain_PQconsumeInput(PGconn *conn);
PGnotify *rain_PQnotifies(PGconn *conn);

#endif
