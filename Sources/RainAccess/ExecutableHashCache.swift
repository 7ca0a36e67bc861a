import Glibc
import RainCore
import RainCrypto
import RainSystem
import Synchronization

/// What a file's content hash is cached under: its device, inode, size and change time (`ctime`,
/// which every write moves and no caller can set back). A file rewritten in place, or a new file at
/// the same path, has another key.
public struct FileKey: Hashable, Sendable {
    public var device: UInt64
    public var inode: UInt64
    public var size: Int64
    public var changeSeconds: Int64
    public var changeNanoseconds: Int64

    /// The key of an open file (`fstat`).
    /// - Throws: RAIN_502 naming `fstat` and `path`.
    public init(of fd: Int32, path: String) throws(RainError) {
        var st = stat()
        try Syscall.call("fstat", path: path) { fstat(fd, &st) }
        self.init(st)
    }

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        changeSeconds = Int64(st.st_ctim.tv_sec)
        changeNanoseconds = Int64(st.st_ctim.tv_nsec)
    }
}

/// The SHA-256 of executables (and interpreter scripts) by `FileKey`, so a caller that connects
/// again is not hashed again. Bounded: past `capacity` entries the oldest goes.
public final class ExecutableHashCache: Sendable {
    private struct State {
        var hashes: [FileKey: [UInt8]] = [:]
        var order: [FileKey] = []
        var hits = 0
    }

    private let state = Mutex(State())
    /// The most entries kept.
    public let capacity: Int

    /// A cache of at most `capacity` entries.
    public init(capacity: Int = 256) { self.capacity = max(1, capacity) }

    /// Hashes served from the cache so far (tests, stats).
    public var hitCount: Int { state.withLock { $0.hits } }
    /// Entries held.
    public var count: Int { state.withLock { $0.hashes.count } }

    /// The SHA-256 of the open regular file `fd`, from the cache when its `FileKey` is known;
    /// otherwise read from its start a block at a time (memory stays bounded) and cached.
    /// - Parameters:
    ///   - path: the file, for messages.
    ///   - limit: the largest file hashed.
    /// - Throws: RAIN_202 (reason `caller_unidentified`) when the file is not a regular file, is
    ///   larger than `limit`, or changed while it was read; RAIN_502 when a call fails.
    public func sha256(of fd: Int32, path: String, limit: Int64) throws(RainError) -> [UInt8] {
        var st = stat()
        try Syscall.call("fstat", path: path) { fstat(fd, &st) }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw CallerIdentityReader.unidentified("\(path) is not a regular file")
        }
        let key = FileKey(st)
        if let known = state.withLock({ s -> [UInt8]? in
            guard let hash = s.hashes[key] else { return nil }
            s.hits += 1
            return hash
        }) {
            return known
        }
        guard key.size <= limit else {
            throw CallerIdentityReader.unidentified("\(path) is larger than \(limit) bytes; it is not hashed")
        }
        let hash = try Self.hashContent(fd, path: path)
        guard try FileKey(of: fd, path: path) == key else {
            throw CallerIdentityReader.unidentified("\(path) changed while it was hashed; try again")
        }
        state.withLock { s in
            guard s.hashes.updateValue(hash, forKey: key) == nil else { return }
            s.order.append(key)
            if s.order.count > capacity { s.hashes[s.order.removeFirst()] = nil }
        }
        return hash
    }

    /// Streams the file from offset 0 through SHA-256 (`pread`, so the descriptor's offset does not matter).
    static func hashContent(_ fd: Int32, path: String) throws(RainError) -> [UInt8] {
        let hasher = try SHA256Hasher()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 << 10, alignment: 16)
        defer { buffer.deallocate() }
        var offset: off_t = 0
        while true {
            let n = try Syscall.call("read", path: path) { pread(fd, buffer.baseAddress, buffer.count, offset) }
            if n == 0 { break }
            try hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            offset += off_t(n)
        }
        return try hasher.finalize()
    }
}
