import Dispatch
import RainCore

/// The SQLite store's `DirectStoreReader`: a second connection to the same file, opened on first
/// use, used only on its own serial queue and only for reads (`PRAGMA query_only`). The WAL journal
/// lets it read while the store's writer connection writes; each read is one read transaction.
final class SQLiteDirectReader: DirectStoreReader, @unchecked Sendable {
    // @unchecked: `connection` and `isClosed` are read and written only on `queue` (a serial
    // queue); `path` is immutable.
    private var connection: SQLiteConnection?
    private var isClosed = false
    private let queue = DispatchQueue(label: "rain.authority.sqlite.read")
    private let path: String

    init(path: String) {
        self.path = path
    }

    func accountAccessWithPasskeys(
        appID: String, accessHash: [UInt8],
        completion: @escaping @Sendable (Result<(access: AccountAccess, passkeys: [PasskeyCredentialRecord])?, RainError>) -> Void
    ) {
        read("read an account", completion) { db throws(RainError) in
            try StoreOperations.accountAccessWithPasskeys(db, appID: appID, accessHash: accessHash)
        }
    }

    func accountAccessWithWallet(
        appID: String, accessHash: [UInt8],
        completion: @escaping @Sendable (Result<(access: AccountAccess, wallet: WalletRecord?)?, RainError>) -> Void
    ) {
        read("read a wallet", completion) { db throws(RainError) in
            try StoreOperations.accountAccessWithWallet(db, appID: appID, accessHash: accessHash)
        }
    }

    /// Closes the connection on its queue; later reads fail with RAIN_502.
    func close() async {
        _ = try? await queue.runBlocking { () throws(RainError) in
            self.isClosed = true
            self.connection = nil
        }
    }

    private func read<T: Sendable>(
        _ operation: String, _ completion: @escaping @Sendable (Result<T, RainError>) -> Void,
        _ body: @escaping @Sendable (SQLiteConnection) throws(RainError) -> T
    ) {
        queue.async {
            completion(
                Result { () throws(RainError) -> T in
                    let db = try self.openConnection()
                    return try db.readTransaction(operation) { () throws(RainError) -> T in try body(db) }
                })
        }
    }

    /// The open connection, opened now on first use. Never creates the file: the store did.
    private func openConnection() throws(RainError) -> SQLiteConnection {
        if let connection { return connection }
        guard !isClosed else { throw RainError(.internalError, "authority store: the database is closed") }
        let db = try SQLiteConnection(path: path, createIfMissing: false)
        try db.execute("PRAGMA query_only=1", operation: "make the read connection read-only")
        connection = db
        return db
    }
}
