import Foundation
import PackagePlugin

/// Generates `BuildInfo.swift` into the `rainwallet`, `rainwalletd` and `rainwalletd-test` targets: the version (the
/// committed VERSION file), the commit of HEAD, its date and the compiler's version, for `--version`.
///
/// A build command with declared inputs, not a prebuild command: it runs only when VERSION, the
/// script, the compiler, HEAD or HEAD's branch changes, and `scripts/gen-build-info` rewrites the
/// file only when its content changes, so a build without a new commit recompiles nothing for it,
/// and a new commit recompiles only the two `main` targets.
@main
struct BuildInfoPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let package = context.package.directoryURL
        let script = package.appending(path: "scripts/gen-build-info")
        let version = package.appending(path: "VERSION")
        // A library (RainDevice) gets the version only: it changes with VERSION, never with a
        // commit, so a new commit does not recompile the library and all that depends on it.
        if !["rainwallet", "rainwalletd", "rainwalletd-test"].contains(target.name) {
            let output = context.pluginWorkDirectoryURL.appending(path: "Version.swift")
            return [
                .buildCommand(
                    displayName: "Stamping \(target.name) with its version",
                    executable: URL(filePath: "/bin/sh"),
                    arguments: [script.path, output.path, package.path, "swiftc", "--version-only"],
                    inputFiles: [script, version], outputFiles: [output])
            ]
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "BuildInfo.swift")
        let swiftc = try? context.tool(named: "swiftc").url
        var inputs = [script, version] + Self.gitFiles(package)
        if let swiftc { inputs.append(swiftc) }
        return [
            .buildCommand(
                displayName: "Stamping \(target.name) with its version and commit",
                executable: URL(filePath: "/bin/sh"),
                arguments: [script.path, output.path, package.path, swiftc?.path ?? "swiftc"],
                inputFiles: inputs, outputFiles: [output])
        ]
    }

    /// The files that change when HEAD moves: HEAD, the branch's ref and packed-refs (a worktree's
    /// `.git` file points to its own HEAD; refs live in the common directory).
    static func gitFiles(_ package: URL) -> [URL] {
        func read(_ url: URL) -> String? {
            (try? String(contentsOf: url, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func resolve(_ path: String, from base: URL) -> URL {
            path.hasPrefix("/") ? URL(filePath: path) : base.appending(path: path)
        }
        var gitDirectory = package.appending(path: ".git")
        if let link = read(gitDirectory), link.hasPrefix("gitdir:") {
            gitDirectory = resolve(link.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespaces), from: package)
        }
        let common = read(gitDirectory.appending(path: "commondir")).map { resolve($0, from: gitDirectory) } ?? gitDirectory
        let head = gitDirectory.appending(path: "HEAD")
        var files = [head, common.appending(path: "packed-refs")]
        if let text = read(head), text.hasPrefix("ref:") {
            files.append(common.appending(path: text.dropFirst("ref:".count).trimmingCharacters(in: .whitespaces)))
        }
        return files.filter { FileManager.default.fileExists(atPath: $0.path) }
    }
}
