internal import CProtobufC
internal import CRainProto
import RainCore

// Swift ⇄ protobuf-c for contact.proto's Contact, whose Swift type is RainWallet's public
// `RainWalletContact`. Generated messages and the hand-written authority messages convert their
// contacts with these two functions (the generator's HAND_WRITTEN table names them).

func cContact(_ contact: RainWalletContact?, _ arena: CArena) throws(RainError) -> UnsafeMutablePointer<
    Rain__Wallet__V1__Contact
>? {
    guard let contact else { return nil }
    var c = cMessage(rain__wallet__v1__contact__init)
    switch contact {
    case .email: c.kind = RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_EMAIL
    case .phone: c.kind = RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_PHONE
    }
    c.value = try arena.string(contact.value, field: "contact")
    return arena.box(c)
}

func readContact(_ p: UnsafeMutablePointer<Rain__Wallet__V1__Contact>?) throws(RainError) -> RainWalletContact? {
    guard let c = p?.pointee else { return nil }
    let value = try readString(c.value, field: "contact")
    switch c.kind {
    case RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_EMAIL: return .email(value)
    case RAIN__WALLET__V1__CONTACT_KIND__CONTACT_KIND_PHONE: return .phone(value)
    default: return nil
    }
}
