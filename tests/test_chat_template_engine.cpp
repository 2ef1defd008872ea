// test_chat_template_engine.cpp — the Jinja engine behind ember_chat_apply_template, from the inside:
// whitespace control, statements, expressions, filters, tests and methods against the results Python's
// Jinja gives (each expected string worked out from Jinja's and Python's documented semantics), the
// errors (syntax with line:column, unsupported constructs, runtime), the limits, and random and truncated
// templates that must give a status and never crash.
// Every other header comes before cmocka's, whose fail() macro clashes with ember::fail.
#include "chat/chat_template.hpp"
#include "chat/jinja.hpp"
#include "core/error.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
extern "C" {
#include <cmocka.h>
}
#include "test_util.h"

using namespace ember;
using jinja::Value;

namespace {

jinja::Variables sample_vars() {
    auto msg = [](const char *role, const char *content) {
        auto d = std::make_shared<jinja::Dict>();
        d->set(Value::string("role"), Value::string(role));
        d->set(Value::string("content"), Value::string(content));
        return Value::dict(d);
    };
    return {
        {"messages", Value::list(jinja::List{msg("system", "Be brief."), msg("user", "Hi"), msg("assistant", "Hello!")})},
        {"name", Value::string("World")},
        {"n", Value::integer(7)},
        {"x", Value::number(2.5)},
        {"items", Value::list(jinja::List{Value::integer(3), Value::integer(1), Value::integer(2)})},
        {"flag", Value::boolean(true)},
        {"nothing", Value::none()},
    };
}

std::string render(const char *tmpl) { return jinja::Template(tmpl).render(sample_vars()); }

void expect(const char *tmpl, const char *want) {
    std::string got;
    try {
        got = render(tmpl);
    } catch (const Error &e) {
        fail_msg("template %s failed: %s", tmpl, e.what());
    }
    if (got != want) fail_msg("template %s\n  gave [%s]\n  want [%s]", tmpl, got.c_str(), want);
}

// Limits without the wall-clock one: the other limits' tests must not depend on how fast this machine is
// (an ASan build on a loaded machine can take seconds for a million steps, and the clock then fires first).
jinja::Limits untimed() {
    jinja::Limits l;
    l.max_time = std::chrono::milliseconds{0};
    return l;
}

// The template fails with `status` and a message containing `part`.
void expect_error(const char *tmpl, ember_status status, const char *part, const jinja::Limits &limits = untimed()) {
    try {
        const std::string got = jinja::Template(tmpl).render(sample_vars(), limits);
        fail_msg("template %s rendered [%s], an error was expected", tmpl, got.c_str());
    } catch (const Error &e) {
        if (e.status() != status || !std::strstr(e.what(), part))
            fail_msg("template %s: status %d message [%s], want status %d with [%s]", tmpl, e.status(), e.what(),
                     status, part);
    }
}

void test_text_and_whitespace(void **) {
    expect("plain text", "plain text");
    expect("a{# comment #}b", "ab");
    expect("{{ name }}!", "World!");
    expect("a  {{- name -}}  b", "aWorldb");
    // trim_blocks: the newline after a block tag goes; lstrip_blocks: the indentation before it goes.
    expect("{% if flag %}\nyes\n{% endif %}\nend", "yes\nend");
    expect("x\n    {% if flag %}\n    yes\n    {% endif %}\ny", "x\n    yes\ny");
    expect("a\n  {%+ if flag %}b{% endif %}", "a\n  b");   // + keeps the indentation
    expect("{% if flag +%}\nb{% endif %}", "\nb");         // +%} keeps the newline
    expect("a {%- if flag %} b {% endif -%} c", "a b c");
    expect("  {{ name }}\nx", "  World\nx");   // no lstrip/trim for {{ }}
    expect("{# c #}\nx", "x");              // trim_blocks applies after comments too
    expect("{{ '{{' }}{{ '%}' }}", "{{%}");
    // Jinja reads \r\n and \r as \n and drops one newline at the very end of the template.
    expect("a\r\nb\rc\n", "a\nb\nc");
    expect("{% if flag %}\r\nyes{% endif %}\n\n", "yes");   // one newline dropped, trim_blocks takes the other
}

void test_statements(void **) {
    expect("{% if n > 10 %}big{% elif n > 5 %}mid{% else %}small{% endif %}", "mid");
    expect("{% for m in messages %}{{ loop.index }}{{ m.role[0] }}{% if not loop.last %},{% endif %}{% endfor %}",
           "1s,2u,3a");
    expect("{% for m in messages %}{{ loop.index0 }}{{ loop.first }}{{ loop.revindex }}{{ loop.length }} {% endfor %}",
           "0True33 1False23 2False13 ");
    expect("{% for i in items %}{{ loop.previtem is defined }}{{ loop.nextitem | default('-') }} {% endfor %}",
           "False1 True2 True- ");
    expect("{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.content }} {% endfor %}",
           "1:Hi 2:Hello! ");
    expect("{% for i in [] %}x{% else %}empty{% endfor %}", "empty");
    expect("{% for i in items %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 2 %}{% break %}{% endif %}{{ i }}{% endfor %}",
           "3");
    expect("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;");
    expect("{% for c in 'héllo' %}[{{ c }}]{% endfor %}", "[h][é][l][l][o]");
    expect("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba");
    // set inside a loop does not leak out of it; namespace attributes do.
    expect("{% set c = 0 %}{% for i in items %}{% set c = c + i %}{% endfor %}{{ c }}", "0");
    expect("{% set ns = namespace(c=0, seen=false) %}{% for i in items %}{% set ns.c = ns.c + i %}{% endfor %}"
           "{{ ns.c }}{{ ns.seen }}",
           "6False");
    expect("{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12");
    expect("{% set block %}in {{ name }}{% endset %}[{{ block }}]", "[in World]");
    expect("{% macro greet(who, punct='!') %}Hi {{ who }}{{ punct }}{% endmacro %}{{ greet(name) }} {{ greet('you', punct='?') }}",
           "Hi World! Hi you?");
    expect("{% generation %}kept{% endgeneration %}", "kept");
    // strftime_now is defined (Llama-3.2 tests for it) and gives today's date in the format asked.
    const std::string year = render("{{ strftime_now('%Y') }}");
    assert_int_equal(year.size(), 4);
    assert_true(year >= "2024" && year <= "9999");
    expect("{{ strftime_now is defined }}", "True");
}

void test_expressions(void **) {
    expect("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}",
           "7 9 3 -4 2 3.5 1024");
    expect("{{ 0.1 + 0.2 }} {{ 1.0 }} {{ 1e20 }} {{ 2.5 * 2 }} {{ 1 / 3 }}",
           "0.30000000000000004 1.0 1e+20 5.0 0.3333333333333333");
    expect("{{ 'a' ~ 1 ~ none ~ true }}", "a1NoneTrue");
    expect("{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ [1] + [2] }}", "abcd ababab [1, 2]");
    expect("{{ true and 'x' }} {{ false or 'y' }} {{ not nothing }} {{ None }} {{ True }}", "x y True None True");
    expect("{{ 'b' in 'abc' }} {{ 4 not in items }} {{ 'role' in messages[0] }} {{ 1 == 1.0 }} {{ 'a' < 'b' }}",
           "True True True True True");
    expect("{{ 'yes' if flag else 'no' }} [{{ 'yes' if nothing }}]", "yes []");
    expect("{{ messages[-1]['content'] }} {{ messages[0].role }} {{ messages[5] is defined }}", "Hello! system False");
    expect("{{ items[::-1] }} {{ items[1:] }} {{ 'hello'[1:3] }} {{ 'héllo'[::-1] }} {{ items[:-1] }}",
           "[2, 1, 3] [1, 2] el olléh [3, 1]");
    expect("{{ {'a': [1, 'x', none, 2.5]} }} {{ ['it\\'s'] }}", "{'a': [1, 'x', None, 2.5]} [\"it's\"]");
    expect("{{ \"dq\\n\" | length }} {{ 'a' 'b' }}", "3 ab");
    expect("{{ messages.length }}|{{ undefined_thing }}|", "||");
    expect("{{ [undefined_thing, none] }}", "[Undefined, None]");
}

void test_filters(void **) {
    expect("{{ '  pad  ' | trim }}|{{ 'xxhixx' | trim('x') }}", "pad|hi");
    expect("{{ messages | length }} {{ 'héllo' | length }} {{ name | count }}", "3 5 5");
    expect("{{ 'hello world' | upper }} {{ 'ABC' | lower }} {{ 'hELLO wORLD' | capitalize }} {{ 'hello big-world' | title }}",
           "HELLO WORLD abc Hello world Hello Big-World");
    expect("{{ 'a-b-c' | replace('-', '+') }} {{ missing | default('dflt') }} {{ '' | default('e', true) }} {{ '' | d('kept') }}",
           "a+b+c dflt e ");
    expect("{{ items | join(', ') }} {{ messages | map(attribute='role') | join('/') }}", "3, 1, 2 system/user/assistant");
    expect("{{ items | first }} {{ items | last }} {{ 'abc' | first }}", "3 2 a");
    expect("{{ messages[1] | tojson }} {{ 'é\"\\n' | tojson }} {{ [1, 2.0, none, true] | tojson }}",
           "{\"role\": \"user\", \"content\": \"Hi\"} \"é\\\"\\n\" [1, 2.0, null, true]");
    expect("{{ {'a': [1]} | tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ]\n}");
    expect("{{ 42 | string }}{{ '12' | int + 1 }}{{ 'x' | int }}{{ 2.7 | int }}{{ '1.5' | float }}", "4213021.5");
    expect("{{ 'ab' | list }} {% for k, v in {'k': 'v'} | items %}{{ k }}={{ v }}{% endfor %}", "['a', 'b'] k=v");
    expect("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", "['Hi']");
    expect("{{ messages | rejectattr('role', 'in', ['system', 'user']) | map(attribute='role') | first }}", "assistant");
    expect("{{ items | select('odd') | list }} {{ items | reject('odd') | list }}", "[3, 1] [2]");
    expect("{{ ['a', 'b'] | map('upper') | join }}", "AB");
    expect("{{ items | reverse | list }} {{ 'abc' | reverse }}", "[2, 1, 3] cba");
    expect("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", "a\n  b|  a\n  b");
}

void test_tests_and_methods(void **) {
    expect("{{ name is string }}{{ n is number }}{{ n is integer }}{{ x is float }}{{ nothing is none }}"
           "{{ messages is iterable }}{{ messages[0] is mapping }}{{ missing is undefined }}{{ name is not defined }}",
           "TrueTrueTrueTrueTrueTrueTrueTrueFalse");
    expect("{{ 4 is even }}{{ 3 is odd }}{{ 9 is divisibleby(3) }}{{ 9 is divisibleby 4 }}{{ flag is true }}{{ 1 is true }}",
           "TrueTrueTrueFalseTrueFalse");
    expect("{{ '  a b  '.strip() }}|{{ '  a'.lstrip() }}|{{ 'b  '.rstrip() }}|{{ '--a--'.strip('-') }}", "a b|a|b|a");
    expect("{{ name.startswith('Wo') }}{{ name.endswith(('x', 'ld')) }}{{ name.upper() }}{{ name.lower() }}",
           "TrueTrueWORLDworld");
    expect("{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }}",
           "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c']");
    expect("{{ \"they're here\".title() }} {{ 'aXa'.replace('a', 'b') }} {{ ', '.join(['x', 'y']) }}",
           "They'Re Here bXb x, y");
    expect("{{ messages[0].keys() | list }} {{ messages[0].values() | list }} {{ messages[0].get('nope', 'z') }}"
           "{{ messages[0].get('nope') }}",
           "['role', 'content'] ['system', 'Be brief.'] zNone");
}

void test_errors(void **) {
    // Syntax errors: line and column.
    expect_error("ok\n{% if x %}", EMBER_ERR_INVALID_ARGUMENT, "line 2:");
    expect_error("{{ 'unclosed }}", EMBER_ERR_INVALID_ARGUMENT, "unclosed string");
    expect_error("line1\nline2 {{ 1 + }}", EMBER_ERR_INVALID_ARGUMENT, "line 2:");
    expect_error("{% endfor %}", EMBER_ERR_INVALID_ARGUMENT, "syntax error");
    expect_error("{% bogus %}", EMBER_ERR_INVALID_ARGUMENT, "unknown tag 'bogus'");
    expect_error("a{% break %}b", EMBER_ERR_INVALID_ARGUMENT, "'break' outside a for loop");
    expect_error("{% for i in items %}{% else %}{% continue %}{% endfor %}", EMBER_ERR_INVALID_ARGUMENT, "outside");
    expect_error("{{ a ) }}", EMBER_ERR_INVALID_ARGUMENT, "line 1:6");
    // Outside the subset: named, with the line.
    expect_error("\n\n{% include 'x.j2' %}", EMBER_ERR_UNSUPPORTED, "line 3: the tag '{% include %}'");
    expect_error("{{ x | wordwrap }}", EMBER_ERR_UNSUPPORTED, "filter 'wordwrap'");
    expect_error("{{ x | nosuchfilter }}", EMBER_ERR_UNSUPPORTED, "filter 'nosuchfilter'");
    expect_error("{{ x is nosuchtest }}", EMBER_ERR_UNSUPPORTED, "test 'nosuchtest'");
    // As in Jinja 3, filters and tests are looked up when reached: a branch not taken may use others.
    expect("{% if tools %}{{ tools | nosuchfilter }}{{ x is nosuchtest }}{% endif %}ok", "ok");
    expect_error("{{ x is defined 'q' }}", EMBER_ERR_INVALID_ARGUMENT, "takes no arguments");
    expect_error("{{ 4 is divisibleby }}", EMBER_ERR_INVALID_ARGUMENT, "needs an argument");
    expect_error("{{ name.zfill(3) }}", EMBER_ERR_UNSUPPORTED, "string method 'zfill'");
    expect_error("{{ cycler('a') }}", EMBER_ERR_UNSUPPORTED, "function 'cycler'");
    expect_error("{% for x in items recursive %}{% endfor %}", EMBER_ERR_UNSUPPORTED, "recursive");
    // Runtime errors and raise_exception.
    expect_error("{{ raise_exception('Roles must alternate') }}", EMBER_ERR_INVALID_ARGUMENT, "Roles must alternate");
    expect_error("{{ 1 + 'a' }}", EMBER_ERR_INVALID_ARGUMENT, "unsupported operand types for +: 'int' and 'str'");
    expect_error("{{ 1 // 0 }}", EMBER_ERR_INVALID_ARGUMENT, "by zero");
    expect_error("{{ missing.attr }}", EMBER_ERR_INVALID_ARGUMENT, "'missing' is undefined");
    expect_error("{{ 9223372036854775807 + 1 }}", EMBER_ERR_INVALID_ARGUMENT, "integer overflow");
    expect_error("{% set name.x = 1 %}", EMBER_ERR_INVALID_ARGUMENT, "namespace");
}

void test_limits(void **) {
    jinja::Limits small = untimed();
    small.max_output = 1000;
    expect_error("{% for i in range(100) %}0123456789ABCDEF{% endfor %}", EMBER_ERR_INVALID_ARGUMENT, "exceed 1000 bytes",
                 small);
    expect_error("{{ 'x' * 100000 }}", EMBER_ERR_INVALID_ARGUMENT, "exceed", small);
    expect_error("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
                 EMBER_ERR_INVALID_ARGUMENT, "exceed");
    expect_error("{% for i in range(100000000) %}{% endfor %}", EMBER_ERR_INVALID_ARGUMENT, "items");
    jinja::Limits few_steps = untimed();
    few_steps.max_steps = 100000;
    expect_error("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", EMBER_ERR_INVALID_ARGUMENT,
                 "steps", few_steps);
    expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", EMBER_ERR_INVALID_ARGUMENT, "nested deeper");
    const std::string deep = std::string(5000, '(') + "1" + std::string(5000, ')');
    expect_error(("{{ " + deep + " }}").c_str(), EMBER_ERR_INVALID_ARGUMENT, "nesting too deep");
    std::string sum = "{{ 1";
    for (int i = 0; i < 5000; ++i) sum += " + 1";
    expect_error((sum + " }}").c_str(), EMBER_ERR_INVALID_ARGUMENT, "expression nesting too deep");
    std::string filters = "{{ 'x'";
    for (int i = 0; i < 5000; ++i) filters += " | trim";
    expect_error((filters + " }}").c_str(), EMBER_ERR_INVALID_ARGUMENT, "expression nesting too deep");
    expect("{{ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 }}", "10");
    // Values nested without limit (a list put into itself in a loop) would recurse when printed or freed.
    expect_error("{% set ns = namespace(l=[]) %}{% for i in range(100) %}{% set ns.l = [ns.l] %}{% endfor %}",
                 EMBER_ERR_INVALID_ARGUMENT, "nested deeper than 64");
    // A namespace that holds itself prints, and is freed when the render ends (ASan builds check that).
    expect("{% set ns = namespace() %}{% set ns.me = [ns] %}{{ ns.me }} {{ ns }}",
           "[<Namespace {'me': [<Namespace ...>]}>] <Namespace {'me': [<Namespace ...>]}>");
    // Building values is counted: a loop that keeps making large strings stops.
    jinja::Limits little_alloc = untimed();
    little_alloc.max_alloc = 100000;
    expect_error("{% for i in range(1000) %}{% set s = 'abcdefghij' * 100 %}{% endfor %}", EMBER_ERR_INVALID_ARGUMENT,
                 "built more than 100000 bytes", little_alloc);
    expect_error("{{ ('x ' * 1100000).split() | length }}", EMBER_ERR_INVALID_ARGUMENT, "items");
    // Indexing a long string in a loop: each index scans the string, and the scans are counted.
    expect_error("{% set s = 'abcdefghij' * 10000 %}{% for i in range(100000) %}{% set c = s[i] %}{% endfor %}",
                 EMBER_ERR_INVALID_ARGUMENT, "built more than 100000 bytes", little_alloc);
    expect("{{ 'héllo'[1] }}{{ 'héllo'[-4] }}{{ 'héllo'[4] }}[{{ 'héllo'[5] }}][{{ 'héllo'[-6] }}]", "ééo[][]");
    std::string ifs;
    for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
    expect_error(ifs.c_str(), EMBER_ERR_INVALID_ARGUMENT, "nesting too deep");
}

// Random bytes, random mixes of template syntax, and every prefix of real templates: each must either
// render or throw ember::Error; a crash or another exception fails the test (ASan builds check memory).
void test_fuzz_no_crash(void **) {
    const char *const pieces[] = {
        "{{", "}}", "{%", "%}", "{#", "#}", "-", "+", "if", "for", "in", "endif", "endfor", "else", "set", "=",
        "ns", ".", "x", "messages", "loop", "(", ")", "[", "]", "{", "}", "'s'", "\"", "1", "2.5", "|", "trim",
        "join", "is", "not", "defined", ",", ":", "~", "*", "//", "%", "macro", "endmacro", "namespace",
        "raise_exception", "\n", " ", "range", "items", "tojson", "and", "or", "none", "[::-1]", "\\",
    };
    const size_t n_pieces = sizeof pieces / sizeof pieces[0];
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    auto next = [&rng]() {
        rng ^= rng >> 12;
        rng ^= rng << 25;
        rng ^= rng >> 27;
        return rng * 0x2545F4914F6CDD1Dull;
    };
    jinja::Limits limits;
    limits.max_steps = 100000;
    limits.max_output = 1 << 16;
    size_t rendered = 0, failed = 0;
    auto attempt = [&](const std::string &t) {
        try {
            jinja::Template(t).render(sample_vars(), limits);
            ++rendered;
        } catch (const Error &) {
            ++failed;
        }
    };
    for (int iter = 0; iter < 3000; ++iter) {
        std::string t;
        const size_t len = next() % 24;
        for (size_t i = 0; i < len; ++i) {
            if (next() % 8 == 0) t += char(next() % 256);
            else t += pieces[next() % n_pieces];
        }
        attempt(t);
    }
    const std::string real =
        "{%- set ns = namespace(sys='') -%}{% for m in messages %}{% if m['role'] == 'system' %}"
        "{% set ns.sys = m['content'] | trim %}{% elif loop.index0 % 2 == 0 %}{{ '[INST] ' + m.content.strip() + "
        "' [/INST]' }}{% else %}{{ m['content'][::-1] ~ eos_token | default('</s>') }}{% endif %}{% endfor %}";
    for (size_t cut = 0; cut <= real.size(); ++cut) attempt(real.substr(0, cut));
    assert_true(rendered > 0);
    assert_true(failed > 0);
}

void test_chatml_fallback_text(void **) {
    chat::RenderInput in;
    in.messages = {{"user", "Hi"}, {"assistant", "Hello"}};
    in.add_generation_prompt = true;
    assert_string_equal(chat::render(chat::kChatmlTemplate, in).c_str(),
                        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>assistant\n");
}

} // namespace

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_and_whitespace),
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_expressions),
        cmocka_unit_test(test_filters),
        cmocka_unit_test(test_tests_and_methods),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_fuzz_no_crash),
        cmocka_unit_test(test_chatml_fallback_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
