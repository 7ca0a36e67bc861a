/// Path arithmetic on strings with the rules of Foundation's `NSString` path methods, for the few
/// places that join or split paths: `NSString` lives in the Foundation module that links ICU.
package enum PathText {
    /// `directory` and `component` joined by a `/` (none added when `directory` ends with one), as
    /// `NSString.appendingPathComponent` (`"a/" + "b"` is `a/b`, `"" + "b"` is `b`).
    package static func joined(_ directory: String, _ component: String) -> String {
        if component.isEmpty { return directory }
        if directory.isEmpty { return component }
        return directory.hasSuffix("/") ? directory + component : directory + "/" + component
    }

    /// The path without its last component, as `NSString.deletingLastPathComponent`
    /// (`/a/b` is `/a`, `/a` is `/`, `a` is empty, `/` stays `/`).
    package static func deletingLastComponent(_ path: String) -> String {
        let standard = standardSlashes(path)
        if standard == "/" { return "/" }
        guard let slash = standard.lastIndex(of: "/") else { return "" }
        if slash == standard.startIndex { return "/" }
        return String(standard[..<slash])
    }

    /// The last component, as `NSString.lastPathComponent` (`/a/b/` is `b`, `/` stays `/`).
    package static func lastComponent(_ path: String) -> String {
        let standard = standardSlashes(path)
        if standard == "/" { return "/" }
        guard let slash = standard.lastIndex(of: "/") else { return standard }
        return String(standard[standard.index(after: slash)...])
    }

    /// Repeated slashes made one and a trailing slash dropped (but `/` kept), as `NSString` reads a
    /// path before taking it apart.
    private static func standardSlashes(_ path: String) -> String {
        var out = ""
        var previousWasSlash = false
        for character in path {
            if character == "/" {
                if previousWasSlash { continue }
                previousWasSlash = true
            } else {
                previousWasSlash = false
            }
            out.append(character)
        }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out
    }
}
