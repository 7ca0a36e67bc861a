import RainCore
import RainCrypto
import Testing

@testable import RainSigning

/// Messages, signatures and transactions made by an independent library, solders 0.29.0
/// (`pip install --target /tmp/sol-judge solders==0.29.0`), with this script:
///
///     from solders.keypair import Keypair
///     from solders.pubkey import Pubkey
///     from solders.hash import Hash
///     from solders.instruction import Instruction, AccountMeta
///     from solders.message import Message, MessageV0, to_bytes_versioned
///     from solders.transaction import Transaction, VersionedTransaction
///     from solders.signature import Signature
///     from solders.system_program import transfer, TransferParams
///     from solders.compute_budget import set_compute_unit_limit, set_compute_unit_price
///     from solders.address_lookup_table_account import AddressLookupTableAccount
///     def kp(n): return Keypair.from_seed(bytes([n] * 32))
///     wallet, payer, bob = kp(1), kp(2), kp(3)
///     blockhash = Hash(bytes(range(32)))
///     # legacy: the wallet pays and sends 1.5 SOL to bob
///     m = Message.new_with_blockhash([transfer(TransferParams(from_pubkey=wallet.pubkey(),
///         to_pubkey=bob.pubkey(), lamports=1_500_000_000))], wallet.pubkey(), blockhash)
///     sig = wallet.sign_message(bytes(m)); assert sig.verify(wallet.pubkey(), bytes(m))
///     tx = Transaction.populate(m, [sig])
///     # legacy, co-signed: payer pays, the wallet (second signer) sends 1 lamport
///     m2 = Message.new_with_blockhash([transfer(TransferParams(from_pubkey=wallet.pubkey(),
///         to_pubkey=bob.pubkey(), lamports=1))], payer.pubkey(), blockhash)
///     sig2 = wallet.sign_message(bytes(m2))
///     tx2 = Transaction.populate(m2, [Signature.default(), sig2])
///     # v0: compute budget, then TransferChecked of 2.5 USDC to an account in a lookup table
///     token = Pubkey.from_string("TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA")
///     usdc = Pubkey.from_string("EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v")
///     source, destination, table = kp(4).pubkey(), kp(5).pubkey(), kp(6).pubkey()
///     data = bytes([12]) + (2_500_000).to_bytes(8, "little") + bytes([6])
///     tc = Instruction(token, data, [AccountMeta(source, False, True), AccountMeta(usdc, False, False),
///         AccountMeta(destination, False, True), AccountMeta(wallet.pubkey(), True, False)])
///     lut = AddressLookupTableAccount(table, [kp(7).pubkey(), kp(8).pubkey(), destination])
///     m3 = MessageV0.try_compile(wallet.pubkey(), [set_compute_unit_limit(200_000),
///         set_compute_unit_price(50_000), tc], [lut], blockhash)
///     sig3 = wallet.sign_message(to_bytes_versioned(m3))
///     tx3 = VersionedTransaction.populate(m3, [sig3])
///     # v0, two tables, an unknown program (kp(9)) reading accounts of both
///     prog, tA, tB = kp(9).pubkey(), kp(10).pubkey(), kp(11).pubkey()
///     a0, a1, b0, b1 = kp(12).pubkey(), kp(13).pubkey(), kp(14).pubkey(), kp(15).pubkey()
///     unk = Instruction(prog, bytes([1, 2, 3]), [AccountMeta(a1, False, False), AccountMeta(b0, False, True),
///         AccountMeta(a0, False, True), AccountMeta(b1, False, False), AccountMeta(wallet.pubkey(), True, True)])
///     m4 = MessageV0.try_compile(wallet.pubkey(), [unk], [AddressLookupTableAccount(tA, [a0, a1]),
///         AddressLookupTableAccount(tB, [b0, b1])], blockhash)
///     # printed: bytes(...).hex() of m, sig, tx, m2, sig2, tx2, to_bytes_versioned(m3), sig3, tx3,
///     # to_bytes_versioned(m4), and str() of the public keys
enum SolanaVectors {
    /// `Keypair.from_seed(bytes([1] * 32))`: the wallet's Ed25519 seed.
    static let walletSeed = [UInt8](repeating: 1, count: 32)
    static let walletAddress = "AKnL4NNf3DGWZJS6cPknBuEGnVsV4A4m5tgebLHaRSZ9"
    static let payerAddress = "9hSR6S7WPtxmTojgo6GG3k4yDPecgJY292j7xrsUGWBu"
    static let bobAddress = "GyGKxMyg1p9SsHfm15MkNUu1u9TN2JtTspcdmrtGUdse"
    static let blockhash = "1thX6LZfHDZZKUs92febYZhYRcXddmzfzF2NvTkPNE"

    static let v0Source = "EdmxWPmx2WH6WgFfTdu9xfkYf3k1g5wD1zccTVySEEh1"
    static let v0Table = "AKkzLhjhyFtM9j7WAhbaqYpFe49cXeJBg2kzLRC2PnNa"
    static let lookupsProgram = "J2xccRtuG43drESLYznHhLhQkLTdfepcKYbiQ9BsJVaf"
    static let lookupsTableA = "5Z6Ay5NEcbg3xhopc522sBCRXQujkTiuDRnHGfQdcnSf"
    static let lookupsTableB = "7v54NWdBtkjuAFJrLGsS2SXnuk8nKam81mZJeeYxVFi9"

    static let legacyMessage = bytes(
        """
        010001038a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5ced4928c628d1c2c6eae903389059\
        95612959273a5c63f93636c14614ac8737d10000000000000000000000000000000000000000000000000000000000000000\
        000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f01020200010c02000000002f685900000000
        """)

    static let legacySignature = bytes(
        """
        c4774d0e18239f17285123468dc6d2471f701a5ac130b83dc8429b3ae0f051d6f22ee93b1bbb0e6c75471ae487c5d08c3e2e\
        a97201b41c4a6ef46008b271f80d
        """)

    static let legacyTransaction = bytes(
        """
        01c4774d0e18239f17285123468dc6d2471f701a5ac130b83dc8429b3ae0f051d6f22ee93b1bbb0e6c75471ae487c5d08c3e\
        2ea97201b41c4a6ef46008b271f80d010001038a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f\
        5ced4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d10000000000000000000000000000000000\
        000000000000000000000000000000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f010202\
        00010c02000000002f685900000000
        """)

    static let cosignedMessage = bytes(
        """
        020001048139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b3948a88e3dd7409f195fd52db2d3cba\
        5d72ca6709bf1d94121bf3748801b40f6f5ced4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1\
        0000000000000000000000000000000000000000000000000000000000000000000102030405060708090a0b0c0d0e0f1011\
        12131415161718191a1b1c1d1e1f01030201020c020000000100000000000000
        """)

    static let cosignedSignature = bytes(
        """
        8b47a5bf1630564a03b569bb3caf6a356ce84c023a1f7e593b4d4ee8a97062f2888ab5f8e1df90b233ad5e09fbb9581b5538\
        57b533689e2680f639ad6027770b
        """)

    static let cosignedTransaction = bytes(
        """
        0200000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\
        0000000000000000000000000000008b47a5bf1630564a03b569bb3caf6a356ce84c023a1f7e593b4d4ee8a97062f2888ab5\
        f8e1df90b233ad5e09fbb9581b553857b533689e2680f639ad6027770b020001048139770ea87d175f56a35466c34c7ecccb\
        8d8a91b4ee37a25df60f5b8fc9b3948a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5ced4928\
        c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1000000000000000000000000000000000000000000\
        0000000000000000000000000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f01030201020c02\
        0000000100000000000000
        """)

    static let v0Message = bytes(
        """
        80010003058a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5cca93ac1705187071d67b83c7ff\
        0efe8108e8ec4530575d7726879333dbdabe7c0306466fe5211732ffecadba72c39be7bc8ce5bbc5f7126b2c439b3a400000\
        0006ddf6e1d765a193d9cbe146ceeb79ac1cb485ed5f5b37913a8cf5857eff00a9c6fa7af3bedbad3a3d65f36aabc97431b1\
        bbe4c2d2f6e0e47ca60203452f5d61000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f030200\
        0502400d03000200090350c30000000000000304010405000a0ca02526000000000006018a875fff1eb38451577acd5afee4\
        05456568dd7c89e090863a0557bc7af49f17010200
        """)

    static let v0Signature = bytes(
        """
        7dab9e1972a2a226f5bba92ed55d55469ae2cf14641c48b15c0a615e23b3417840d338d61369e75ab162f0ab1bae00d184b5\
        bbc8d6214d0bb93e500862974409
        """)

    static let v0Transaction = bytes(
        """
        017dab9e1972a2a226f5bba92ed55d55469ae2cf14641c48b15c0a615e23b3417840d338d61369e75ab162f0ab1bae00d184\
        b5bbc8d6214d0bb93e50086297440980010003058a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f\
        6f5cca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c0306466fe5211732ffecadba72c39be7\
        bc8ce5bbc5f7126b2c439b3a4000000006ddf6e1d765a193d9cbe146ceeb79ac1cb485ed5f5b37913a8cf5857eff00a9c6fa\
        7af3bedbad3a3d65f36aabc97431b1bbe4c2d2f6e0e47ca60203452f5d61000102030405060708090a0b0c0d0e0f10111213\
        1415161718191a1b1c1d1e1f0302000502400d03000200090350c30000000000000304010405000a0ca02526000000000006\
        018a875fff1eb38451577acd5afee405456568dd7c89e090863a0557bc7af49f17010200
        """)

    static let lookupsMessage = bytes(
        """
        80010001028a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5cfd1724385aa0c75b64fb78cd60\
        2fa1d991fdebf76b13c58ed702eac835e9f618000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e\
        1f0101050403020500030102030243a72e714401762df66b68c26dfbdf2682aaec9f2474eca4613e424a0fbafd3c01000101\
        66be7e332c7a453332bd9d0a7f7db055f5c5ef1a06ada66d98b39fb6810c473a01000101
        """)

    /// The wallet's key pair.
    static func walletKey() throws -> Ed25519PrivateKey { try Ed25519PrivateKey(rawRepresentation: walletSeed) }

    /// The wallet as `SolanaSigning` sees it.
    static func wallet() throws -> SigningWallet {
        SigningWallet(ethereumAddress: [], solanaPublicKey: try walletKey().publicKey.rawRepresentation)
    }

    /// A transaction request for `payload`.
    static func transaction(_ payload: [UInt8], cluster: String = "", from: String = "") -> SigningRequest {
        SigningRequest(kind: .transaction, chain: .solana, claimedCluster: cluster, payload: payload, from: from)
    }

    /// A message request for `payload`.
    static func message(_ payload: [UInt8], from: String = "") -> SigningRequest {
        SigningRequest(kind: .message, chain: .solana, payload: payload, from: from)
    }

    /// Signs what `prepared` asks with the wallet's key, as the key holder would.
    static func sign(_ prepared: PreparedSigning) throws -> RecoverableSignature {
        guard case .ed25519Message(let bytes) = prepared.input else {
            Issue.record("a Solana request asked for \(prepared.input)")
            return RecoverableSignature(r: [], s: [], recoveryID: 0)
        }
        let signature = try walletKey().signature(for: bytes)
        return RecoverableSignature(r: Array(signature[..<32]), s: Array(signature[32...]), recoveryID: 0)
    }

    /// Checks that a request is refused with exactly this code, field and reason.
    static func expectRefusal(
        _ request: SigningRequest, wallet: SigningWallet, code: RainError.Code = .invalidArgument, field: String,
        reason: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        do {
            _ = try SolanaSigning.prepare(request, wallet: wallet)
            Issue.record("accepted; expected \(code) \(field) \(reason)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.code == code, sourceLocation: sourceLocation)
            #expect(error.details.field == field, sourceLocation: sourceLocation)
            #expect(error.details.reason == reason, "\(error.message)", sourceLocation: sourceLocation)
        }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        guard let bytes = Hex.decode(hex) else {
            Issue.record("bad hex in a vector")
            return []
        }
        return bytes
    }
}
