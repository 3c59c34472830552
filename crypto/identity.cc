#include "crypto/identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <sodium.h>

namespace shoal::crypto {

Status initialize() {
  if (sodium_init() < 0) return internal_error("libsodium failed to initialize");
  return Status::ok();
}

std::string base64url_encode(std::span<const uint8_t> bytes) {
  const int variant = sodium_base64_VARIANT_URLSAFE_NO_PADDING;
  std::string out(sodium_base64_encoded_len(bytes.size(), variant), '\0');
  sodium_bin2base64(out.data(), out.size(), bytes.data(), bytes.size(), variant);
  out.resize(std::strlen(out.c_str()));
  return out;
}

Result<std::string> base64url_decode(std::string_view text, std::string_view field) {
  std::string out(text.size() * 3 / 4 + 3, '\0');
  size_t length = 0;
  const char* end = nullptr;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), nullptr, &length, &end,
                        sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
      end != text.data() + text.size()) {
    return invalid_argument(std::string(field) + ": expected unpadded base64url text");
  }
  out.resize(length);
  return out;
}

std::string key_to_text(const PublicKey& key) { return base64url_encode(key); }

Result<PublicKey> key_from_text(std::string_view text, std::string_view field) {
  SHOAL_ASSIGN_OR_RETURN(std::string raw, base64url_decode(text, field));
  if (raw.size() != crypto_sign_PUBLICKEYBYTES) {
    return invalid_argument(std::string(field) + ": expected a 32-byte Ed25519 public key, got " +
                            std::to_string(raw.size()) + " bytes");
  }
  PublicKey key;
  std::memcpy(key.data(), raw.data(), key.size());
  return key;
}

Identity Identity::generate() {
  Identity identity;
  crypto_sign_keypair(identity.public_key_.data(), identity.secret_key_.data());
  return identity;
}

Identity Identity::from_seed(const std::array<uint8_t, 32>& seed) {
  Identity identity;
  crypto_sign_seed_keypair(identity.public_key_.data(), identity.secret_key_.data(), seed.data());
  return identity;
}

Signature Identity::sign(std::span<const uint8_t> message) const {
  Signature signature;
  crypto_sign_detached(signature.data(), nullptr, message.data(), message.size(),
                       secret_key_.data());
  return signature;
}

bool verify(const PublicKey& key, std::span<const uint8_t> message, const Signature& signature) {
  return crypto_sign_verify_detached(signature.data(), message.data(), message.size(),
                                     key.data()) == 0;
}

namespace {

class Ed25519Signatures final : public SignatureScheme {
 public:
  Signature sign(const Identity& signer, std::span<const uint8_t> message) const override {
    return signer.sign(message);
  }
  bool verify(const PublicKey& key, std::span<const uint8_t> message,
              const Signature& signature) const override {
    return crypto::verify(key, message, signature);
  }
};

}  // namespace

const SignatureScheme& ed25519_signatures() {
  static const Ed25519Signatures scheme;
  return scheme;
}

Status Identity::save(const std::string& path) const {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return {ErrorCode::kAlreadyExists,
            "identity key " + path + ": cannot create (" + std::strerror(errno) + ")"};
  }
  ssize_t written = ::write(fd, secret_key_.data(), secret_key_.size());
  bool synced = ::fsync(fd) == 0;
  ::close(fd);
  if (written != static_cast<ssize_t>(secret_key_.size()) || !synced) {
    return internal_error("identity key " + path + ": write failed");
  }
  return Status::ok();
}

Result<Identity> Identity::load(const std::string& path, KeyFileAccess access) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return not_found("identity key " + path + ": cannot open (" + std::strerror(errno) +
                     "); run `shoald init` first");
  }
  struct stat info {};
  const mode_t refused = access == KeyFileAccess::kOwnerOnly ? 077 : 037;
  if (::fstat(fd, &info) != 0 || (info.st_mode & refused) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    return Status(ErrorCode::kPermissionDenied,
                  "identity key " + path + ": mode " + mode +
                      (access == KeyFileAccess::kOwnerOnly
                           ? " lets group or others read it; expected 0600 (run: chmod 600 " + path + ")"
                           : " lets others read it or its group write it; expected 0600 or 0440"));
  }
  Identity identity;
  ssize_t got = ::read(fd, identity.secret_key_.data(), identity.secret_key_.size());
  ::close(fd);
  if (got != static_cast<ssize_t>(identity.secret_key_.size())) {
    return corrupt("identity key " + path + ": expected 64 bytes");
  }
  crypto_sign_ed25519_sk_to_pk(identity.public_key_.data(), identity.secret_key_.data());
  return identity;
}

Result<CurveKey> curve_public_key(const PublicKey& ed25519) {
  CurveKey out{};
  if (crypto_sign_ed25519_pk_to_curve25519(out.data(), ed25519.data()) != 0) {
    return invalid_argument("peer key: not a valid Ed25519 public key (no CURVE key derives from it)");
  }
  return out;
}

CurveKeyPair Identity::curve_keys() const {
  CurveKeyPair pair;
  // A key pair we generated or loaded and checked always converts.
  [[maybe_unused]] int pk = crypto_sign_ed25519_pk_to_curve25519(pair.public_key.data(), public_key_.data());
  [[maybe_unused]] int sk = crypto_sign_ed25519_sk_to_curve25519(pair.secret_key.data(), secret_key_.data());
  return pair;
}

}  // namespace shoal::crypto
