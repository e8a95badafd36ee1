// BIND key-file parser (see tsig_key.hpp).
#include "actions/dns/tsig_key.hpp"

#include <cstddef>
#include <vector>

#include "probes/dns/ldns_util.hpp"

namespace fo::actions::dns {
namespace {

constexpr std::size_t kMaxTokens = 64;
constexpr std::size_t kMaxKeyName = 255;

struct Token {
  enum class Kind { word, string, punct } kind;
  std::string text;
};

// Splits the file into words, quoted strings and the punctuation { } ;. Returns "" or an error.
std::string tokenize(std::string_view s, std::vector<Token>& out) {
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (c == '#' || (c == '/' && i + 1 < s.size() && s[i + 1] == '/')) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const std::size_t end = s.find("*/", i + 2);
      if (end == std::string_view::npos) return "unterminated /* comment";
      i = end + 2;
    } else if (c == '{' || c == '}' || c == ';') {
      out.push_back({Token::Kind::punct, std::string(1, c)});
      ++i;
    } else if (c == '"') {
      const std::size_t end = s.find('"', i + 1);
      if (end == std::string_view::npos) return "unterminated quoted string";
      out.push_back({Token::Kind::string, std::string(s.substr(i + 1, end - i - 1))});
      i = end + 1;
    } else {
      const std::size_t start = i;
      while (i < s.size() && s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' &&
             s[i] != '{' && s[i] != '}' && s[i] != ';' && s[i] != '"')
        ++i;
      out.push_back({Token::Kind::word, std::string(s.substr(start, i - start))});
    }
    if (out.size() > kMaxTokens) return "too long for a key file (more than one key?)";
  }
  return "";
}

bool is_base64(std::string_view s) {
  std::size_t data = 0, pad = 0;
  for (char c : s) {
    const bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (c == '=') {
      ++pad;
    } else if (pad > 0 || !(alnum || c == '+' || c == '/')) {
      return false;
    } else {
      ++data;
    }
  }
  return data > 0 && pad <= 2 && (data + pad) % 4 == 0;
}

}  // namespace

TsigKeyParse parse_tsig_key(std::string_view text) {
  TsigKeyParse out;
  std::vector<Token> t;
  if (std::string e = tokenize(text, t); !e.empty()) {
    out.error = e;
    return out;
  }
  std::size_t i = 0;
  auto is = [&](std::string_view punct) {
    return i < t.size() && t[i].kind == Token::Kind::punct && t[i].text == punct;
  };
  auto fail = [&](std::string why) {
    out.error = std::move(why);
    return out;
  };
  if (i >= t.size() || t[i].kind != Token::Kind::word ||
      probes::dns::lower_ascii(t[i].text) != "key")
    return fail("expected a `key \"name\" { ... };` statement");
  ++i;
  if (i >= t.size() || t[i].kind == Token::Kind::punct) return fail("expected the key's name");
  out.key.name = t[i++].text;
  if (out.key.name.empty() || out.key.name.size() > kMaxKeyName)
    return fail("the key's name must be 1..255 characters");
  if (!is("{")) return fail("expected '{' after the key's name");
  ++i;
  bool have_secret = false;
  while (i < t.size() && !is("}")) {
    if (t[i].kind != Token::Kind::word) return fail("expected 'algorithm' or 'secret'");
    const std::string field = probes::dns::lower_ascii(t[i++].text);
    if (i >= t.size() || t[i].kind == Token::Kind::punct)
      return fail("expected a value after '" + field + "'");
    const std::string value = t[i++].text;
    if (!is(";")) return fail("expected ';' after the value of '" + field + "'");
    ++i;
    if (field == "algorithm") {
      out.key.algorithm = probes::dns::lower_ascii(value);
    } else if (field == "secret") {
      if (!is_base64(value)) return fail("the secret is not valid base64");
      out.key.secret = value;
      have_secret = true;
    } else {
      return fail("unknown field '" + field.substr(0, 32) + "' (expected algorithm, secret)");
    }
  }
  if (!is("}")) return fail("expected '}' closing the key");
  ++i;
  if (!is(";")) return fail("expected ';' after '}'");
  ++i;
  if (i != t.size()) return fail("unexpected text after the key (one key per file)");
  if (out.key.algorithm.empty()) return fail("the key has no 'algorithm'");
  if (!have_secret) return fail("the key has no 'secret'");
  std::string alg = out.key.algorithm;
  if (!alg.empty() && alg.back() == '.') alg.pop_back();
  if (alg == "hmac-md5" || alg == "hmac-md5.sig-alg.reg.int") {
    alg = "hmac-md5";
    out.key.algorithm_name = "hmac-md5.sig-alg.reg.int.";
  } else if (alg == "hmac-sha1" || alg == "hmac-sha224" || alg == "hmac-sha256" ||
             alg == "hmac-sha384" || alg == "hmac-sha512") {
    out.key.algorithm_name = alg + ".";
  } else {
    return fail("unknown algorithm '" + alg.substr(0, 32) +
                "' (expected hmac-sha256, hmac-sha384, hmac-sha512, hmac-sha224, hmac-sha1 or "
                "hmac-md5)");
  }
  out.key.algorithm = alg;
  out.ok = true;
  return out;
}

}  // namespace fo::actions::dns
