/// Suggestions for mistyped words: the closest of the known words by edit distance.
public enum EditDistance {
    /// The optimal-string-alignment distance: insertions, deletions, substitutions and swaps of
    /// two neighbouring characters each cost 1 (`stauts` → `status` is 1).
    public static func distance(_ a: String, _ b: String) -> Int {
        let x = Array(a)
        let y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous2 = [Int](repeating: 0, count: y.count + 1)
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] {
                    current[j] = min(current[j], previous2[j - 2] + 1)
                }
            }
            previous2 = previous
            previous = current
        }
        return previous[y.count]
    }

    /// The known word closest to `word`, when it is close enough to be what was meant: at most a
    /// third of the word's length away (at least 1), or a word that `word` begins.
    /// Ties go to the earlier candidate.
    public static func closest(to word: String, among candidates: [String]) -> String? {
        let bare = word.drop { $0 == "-" }
        guard !bare.isEmpty else { return nil }
        var best: (word: String, distance: Int)?
        for candidate in candidates where candidate != word {
            let d = distance(word, candidate)
            if best.map({ d < $0.distance }) ?? true { best = (candidate, d) }
        }
        if let best, best.distance <= max(1, bare.count / 3) { return best.word }
        // A prefix of a single command (`stat` for `status`).
        let prefixed = candidates.filter { $0.hasPrefix(word) && $0 != word }
        if bare.count >= 2, prefixed.count == 1 { return prefixed[0] }
        return nil
    }
}
