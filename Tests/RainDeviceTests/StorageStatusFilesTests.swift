import RainKeyStore
import RainStore
import Testing

/// `storage status` says what each key protects by the files an operator finds in the state
/// directory.
@Suite struct StorageStatusFilesTests {
    @Test("the authority's master key names the embedded authority's real database file")
    func authorityMasterNamesItsDatabase() {
        #expect(KeySlot.authorityMaster.protects.contains(SQLiteAuthorityStore.fileName))
    }
}
