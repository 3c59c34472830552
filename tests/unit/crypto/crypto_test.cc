#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "crypto/id_card.h"
#include "crypto/identity.h"
#include "crypto/invitation.h"

namespace shoal::crypto {
namespace {

class CryptoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(initialize().is_ok());
    char pattern[] = "/tmp/shoal-crypto.XXXXXX";
    dir_ = mkdtemp(pattern);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(CryptoTest, SignatureVerifiesOnlyForTheSameMessageAndKey) {
  Identity alice = Identity::generate(), bob = Identity::generate();
  std::vector<uint8_t> message = {1, 2, 3};
  Signature signature = alice.sign(message);
  EXPECT_TRUE(verify(alice.public_key(), message, signature));
  EXPECT_FALSE(verify(bob.public_key(), message, signature));
  message[0] = 9;
  EXPECT_FALSE(verify(alice.public_key(), message, signature));
}

TEST_F(CryptoTest, KeyFileIsWrittenWithMode0600AndLoadsBack) {
  Identity identity = Identity::generate();
  std::string path = dir_ + "/identity.key";
  ASSERT_TRUE(identity.save(path).is_ok());
  struct stat info {};
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  auto loaded = Identity::load(path);
  ASSERT_TRUE(loaded.is_ok());
  EXPECT_EQ(loaded->public_key(), identity.public_key());
  EXPECT_FALSE(identity.save(path).is_ok()) << "never overwrites a key";
}

TEST_F(CryptoTest, KeyFileReadableByOthersIsRefusedWithTheFix) {
  std::string path = dir_ + "/identity.key";
  ASSERT_TRUE(Identity::generate().save(path).is_ok());
  chmod(path.c_str(), 0640);
  auto loaded = Identity::load(path);
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_EQ(loaded.status().code(), ErrorCode::kPermissionDenied);
  EXPECT_NE(loaded.status().message().find("chmod 600"), std::string::npos);
}

TEST_F(CryptoTest, IdCardRoundTripsAndNamesBadParts) {
  IdCard card{"east-1", "acme", Identity::generate().public_key(), "tcp://10.0.0.1:7400"};
  auto parsed = parse_id_card(card.to_string());
  ASSERT_TRUE(parsed.is_ok());
  EXPECT_EQ(*parsed, card);
  EXPECT_NE(parse_id_card("shoal-id:v2:a:b:c:tcp://x:1").status().message().find("version"),
            std::string::npos);
  EXPECT_NE(parse_id_card("shoal-id:v1:a:b:notakey:tcp://x:1").status().message().find("public key"),
            std::string::npos);
  std::string no_endpoint = "shoal-id:v1:a:b:" + key_to_text(card.public_key) + ":udp://x";
  EXPECT_NE(parse_id_card(no_endpoint).status().message().find("endpoint"), std::string::npos);
  EXPECT_FALSE(parse_id_card("hello").is_ok());
}

TEST_F(CryptoTest, IdCardWhoseNamesAreNotNamesIsRefusedOnOneLine) {
  std::string key = key_to_text(Identity::generate().public_key());
  for (std::string org : {std::string("\xff\xfe"), std::string("Acme Corp"), std::string("a\nb"),
                          std::string("")}) {
    auto parsed = parse_id_card("shoal-id:v1:east:" + org + ":" + key + ":tcp://h:1");
    ASSERT_FALSE(parsed.is_ok()) << org;
    EXPECT_NE(parsed.status().message().find("id card org"), std::string::npos) << parsed.status().message();
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos) << "one line";
  }
  auto cluster = parse_id_card("shoal-id:v1:EAST:acme:" + key + ":tcp://h:1");
  ASSERT_FALSE(cluster.is_ok());
  EXPECT_NE(cluster.status().message().find("id card cluster"), std::string::npos);
  auto endpoint = parse_id_card("shoal-id:v1:east:acme:" + key + ":tcp://h:1 x");
  ASSERT_FALSE(endpoint.is_ok());
  EXPECT_NE(endpoint.status().message().find("id card endpoint"), std::string::npos);
}

class InvitationTest : public CryptoTest {
 protected:
  Invitation make(TimePoint now) {
    Invitation invitation;
    invitation.id = "abc123";
    invitation.issuer = {"target", "org-t", target_.public_key(), "tcp://127.0.0.1:1"};
    invitation.subject = source_.public_key();
    invitation.namespaces = {"default", "ml"};
    invitation.limits.cpu_milli = 64000;
    invitation.created = now;
    invitation.not_before = now;
    invitation.expires = now + std::chrono::hours(1);
    return invitation;
  }
  Identity target_ = Identity::generate();
  Identity source_ = Identity::generate();
  TimePoint now_ = from_millis(1'800'000'000'000);
};

TEST_F(InvitationTest, TokenRoundTripsAndIsAcceptableBySubject) {
  Invitation invitation = make(now_);
  std::string token = issue_token(invitation, target_);
  EXPECT_EQ(token.rfind("shoal-invite:v1:", 0), 0u);
  auto opened = open_token(token + "\n");
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  EXPECT_EQ(*opened, invitation);
  EXPECT_TRUE(opened->covers("ml"));
  EXPECT_FALSE(opened->covers("prod"));
  EXPECT_TRUE(check_acceptable(*opened, source_.public_key(), now_).is_ok());
}

TEST_F(InvitationTest, PreemptionTermsRoundTripAndAreSigned) {
  Invitation invitation = make(now_);
  std::string plain = issue_token(invitation, target_);
  invitation.limits.preemptible = true;
  invitation.limits.max_priority = -5;
  std::string token = issue_token(invitation, target_);
  EXPECT_GT(token.size(), plain.size()) << "the two fields are appended only when set";
  auto opened = open_token(token);
  ASSERT_TRUE(opened.is_ok()) << opened.status().message();
  EXPECT_TRUE(opened->limits.preemptible);
  EXPECT_EQ(opened->limits.max_priority, -5);
  invitation.limits.max_priority.reset();  // preemptible alone
  opened = open_token(issue_token(invitation, target_));
  ASSERT_TRUE(opened.is_ok());
  EXPECT_EQ(*opened, invitation);
  // A guest cannot lift its own ceiling: the signature covers it.
  std::string tampered = token;
  tampered[tampered.size() - 90] = tampered[tampered.size() - 90] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(open_token(tampered).is_ok());
}

TEST_F(InvitationTest, EachRefusalHasItsOwnMessage) {
  std::string token = issue_token(make(now_), target_);
  // Another key.
  Status other = check_acceptable(*open_token(token), Identity::generate().public_key(), now_);
  EXPECT_NE(other.message().find("subject"), std::string::npos);
  // Expired.
  Status expired = check_acceptable(*open_token(token), source_.public_key(), now_ + std::chrono::hours(2));
  EXPECT_NE(expired.message().find("expired"), std::string::npos);
  // Altered by one character in the payload.
  std::string altered = token;
  altered[30] = altered[30] == 'A' ? 'B' : 'A';
  auto opened = open_token(altered);
  ASSERT_FALSE(opened.is_ok());
  EXPECT_EQ(opened.status().code(), ErrorCode::kInvalidArgument);
  // Signed by someone other than the issuer it names.
  auto forged = open_token(issue_token(make(now_), source_));
  ASSERT_FALSE(forged.is_ok());
  EXPECT_NE(forged.status().message().find("signature"), std::string::npos);
  EXPECT_FALSE(open_token("shoal-invite:v2:abc").is_ok());
}

// An org that was not UTF-8 travelled in a token and, once
// accepted, crashed every later `shoalctl peers`. A signed token is still
// untrusted input: its words follow the same rules as a card's.
TEST_F(InvitationTest, TokenWhoseIssuerOrNamespacesAreNotNamesIsRefused) {
  Invitation invitation = make(now_);
  invitation.issuer.org = "org\xff";
  auto bad_org = open_token(issue_token(invitation, target_));
  ASSERT_FALSE(bad_org.is_ok());
  EXPECT_EQ(bad_org.status().message(), "invitation token issuer: expected UTF-8 text");
  invitation.issuer.org = "Acme Corp";
  auto not_a_name = open_token(issue_token(invitation, target_));
  ASSERT_FALSE(not_a_name.is_ok());
  EXPECT_NE(not_a_name.status().message().find("id card org"), std::string::npos)
      << not_a_name.status().message();
  invitation = make(now_);
  invitation.namespaces = {"default", "ML"};
  auto bad_namespace = open_token(issue_token(invitation, target_));
  ASSERT_FALSE(bad_namespace.is_ok());
  EXPECT_NE(bad_namespace.status().message().find("namespaces"), std::string::npos);
  invitation.namespaces = {};
  EXPECT_FALSE(open_token(issue_token(invitation, target_)).is_ok());
}

TEST_F(InvitationTest, NeverExpiringTokenHasNoExpiry) {
  Invitation invitation = make(now_);
  invitation.expires.reset();
  auto opened = open_token(issue_token(invitation, target_));
  ASSERT_TRUE(opened.is_ok());
  EXPECT_FALSE(opened->expires.has_value());
  EXPECT_TRUE(check_acceptable(*opened, source_.public_key(), now_ + std::chrono::hours(100000)).is_ok());
}

}  // namespace
}  // namespace shoal::crypto
