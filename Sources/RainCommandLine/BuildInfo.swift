/// What `--version` prints: the program's version and what it was built from.
///
/// The values come from a file generated at build time into each executable target by the
/// `BuildInfoPlugin` build tool plugin (it runs `scripts/gen-build-info`): the version from the
/// committed `VERSION` file, the commit of `HEAD`, the commit's date and the compiler's version.
/// The plugin reruns only when `VERSION`, `HEAD` or its branch moves, and rewrites the file only
/// when its content changes, so an ordinary build recompiles nothing for it; the date is the
/// commit's, not the clock's, for the same reason and so that a rebuild of one commit is identical
/// (reproducible builds). Outside a git checkout the commit and date are `unknown`.
public struct BuildInfo: Sendable, Equatable {
    /// The release version (`0.1.0`).
    public var version: String
    /// The abbreviated commit hash built from, or `unknown`.
    public var commit: String
    /// The commit's date (RFC 3339 UTC), or `unknown`.
    public var date: String
    /// The Swift compiler's version (`6.3.1`), or `unknown`.
    public var swiftVersion: String

    /// A build description.
    public init(version: String, commit: String, date: String, swiftVersion: String) {
        self.version = version
        self.commit = commit
        self.date = date
        self.swiftVersion = swiftVersion
    }

    /// The text of `PROGRAM --version`: the version on the first line, then one `key: value` a line.
    public func text(program: String) -> String {
        """
        \(program) \(version)
        commit: \(commit)
        commit date: \(date)
        swift: \(swiftVersion)
        """
    }

    /// The date's day (`2026-12-02`) for a man page's header, or the whole value when it has none.
    public var day: String { date.count >= 10 && date != "unknown" ? String(date.prefix(10)) : date }
}
