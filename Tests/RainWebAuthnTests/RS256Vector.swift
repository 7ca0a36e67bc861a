/// An RS256 vector made once with Python's `cryptography` (RSA-2048, e = 65537): a registration
/// with packed self attestation and an assertion (sign count 7), for RP ID `example.com`,
/// challenge 01…20, credential ID A0…AF. Hex blocks: whitespace is ignored.
enum RS256Vector {
    static let modulus = """
        a4929f491c7d4696875ebc5fa6753f14ea8d543e4fc0197a3646c76896c776cd5ea077da2e4ae20f8fb3af02e41c01c2
        9ebeaef9e7add012e277abe66eb225b08e70b4d4c9aaa190369cc17051abf8fd60b529dec4bd911eac829ef338d33914
        eeb85241ac90d21b1fa07fb0eadeb2728f7eff6d5ccf54a13ef9b63be38352adc7ed878b530351be148f596e3930ede8
        d2008fd49a3e2c8edb82112a781d4a14ec72601f2b0a37c97691c35cf69d3c8c1676725a0fcd116c3aa34fa9203376f8
        f02dbed24f35f0bf34fc50fb3c42ac1ac461b6ba27ec61fcb9c24a1b8be8ae423e610082d481d2e39056fbc72d7c77b5
        b63ee0ef69f0207e84c399f1f9075787
        """
    static let exponent = "010001"
    static let registrationAuthenticatorData = """
        a379a6f6eeafb9a55e378c118034e2751e682fab9f2d30ab13d2125586ce194745000000000000000000000000000000
        00000000000010a0a1a2a3a4a5a6a7a8a9aaabacadaeafa401030339010020590100a4929f491c7d4696875ebc5fa675
        3f14ea8d543e4fc0197a3646c76896c776cd5ea077da2e4ae20f8fb3af02e41c01c29ebeaef9e7add012e277abe66eb2
        25b08e70b4d4c9aaa190369cc17051abf8fd60b529dec4bd911eac829ef338d33914eeb85241ac90d21b1fa07fb0eade
        b2728f7eff6d5ccf54a13ef9b63be38352adc7ed878b530351be148f596e3930ede8d2008fd49a3e2c8edb82112a781d
        4a14ec72601f2b0a37c97691c35cf69d3c8c1676725a0fcd116c3aa34fa9203376f8f02dbed24f35f0bf34fc50fb3c42
        ac1ac461b6ba27ec61fcb9c24a1b8be8ae423e610082d481d2e39056fbc72d7c77b5b63ee0ef69f0207e84c399f1f907
        57872143010001
        """
    static let registrationClientDataJSON =
        #"{"type":"webauthn.create","challenge":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA","origin":"https://example.com","crossOrigin":false}"#
    static let registrationSignature = """
        6d1f710b85598814e3ea0b93f283dd691dad5f1310a3cfc804da6c5a0346b6f062a807b282301d285a8cec8107fa6b63
        1b1171e23773a94c64f0e5e316cabca66efad4c6f63527ee23946ad3a5b4d8d4c3f53ca9d0b8fad16508dd925609e462
        3e4158280b10feba6937fbf586daafe9bcb4537e234635562aebd50b26108381f579ea2cdc3cfdf689711e17a579b2c5
        78c0af6bc15a8a93f37628709511ecc6fe72e4a01adeb53659777476633b0a6f2b2b1721ac47961fb799a3bb3ce17007
        0e59fc316a1bfffc6df1c66258467e7bc3426637254a4b25957b16f7c75326a8f7c3d849d6e4b845e0fdb5258fd62f3c
        7eef5fc9200253384ce4aa54a8928a1a
        """
    static let assertionClientDataJSON =
        #"{"type":"webauthn.get","challenge":"AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA","origin":"https://example.com","crossOrigin":false}"#
    static let assertionSignature = """
        823f6e8ec81aea191935980e79f04738d554fed844add5479c7c979f7d21e3317b453d9b244087b015bc873b5fe86b00
        9eff7df3945386edd3d29ab209e9aa486c434af51e54d88e5c6e4cc2807390f81d6934b82af78cf19dc528e7bc33f33b
        225ca495bc2ed3c03ad139c6df414563d45e073269dff807ea5a1c8219b875baf38286eff279ae7ad31c0c86f3cb5393
        17f56ed9d758e78f57ac998908ea186166b404fbab7e817bf535631a1943974cb64f1f84a19fc82da1ff9ebfc3838511
        91f910996d764e44c14770ff33609d0983c7f9f75e650f961e9e593c49696fca6d381a0cafeb6ae5192cff850dcf72c2
        b8953a2e067764dc48a39bc96ce07326
        """
}
