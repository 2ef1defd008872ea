using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using Ember.Native;

namespace Ember.Tests
{
    /// <summary>Model.ApplyChatTemplate on stories15M, which has no chat template, so the library's
    /// ChatML fallback renders: compared with the C function called directly and with ChatML written out
    /// by hand (ember.h: "&lt;|im_start|&gt;{role}\n{content}&lt;|im_end|&gt;\n" per message, then
    /// "&lt;|im_start|&gt;assistant\n").</summary>
    internal static class ChatTemplateTests
    {
        public static void Register(List<KeyValuePair<string, Action>> tests)
        {
            Action<string, Action> add = (n, a) => tests.Add(new KeyValuePair<string, Action>(n, a));
            add("chat_template_chatml_fallback", ChatMlFallback);
            add("chat_template_explicit_template", ExplicitTemplate);
            add("chat_template_errors", Errors);
            add("chat_template_empty_conversation", EmptyConversation);
        }

        // Non-ASCII content checks the UTF-8 marshalling both ways.
        private static readonly ChatMessage[] Conversation =
        {
            new ChatMessage("system", "You are a helpful assistant."),
            new ChatMessage("user", "Hello! Grüße, 世界"),
        };

        private const string ExpectedChatMl =
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" +
            "<|im_start|>user\nHello! Grüße, 世界<|im_end|>\n" +
            "<|im_start|>assistant\n";

        /// <summary>The C function called through the raw declaration, with strings in unmanaged memory
        /// (a path independent of Model.ApplyChatTemplate's pinning).</summary>
        private static string RawRender(Model m, ChatMessage[] msgs, bool addGenerationPrompt)
        {
            var allocated = new List<IntPtr>();
            try
            {
                var c = new ember_chat_message[msgs.Length];
                for (int i = 0; i < msgs.Length; i++)
                {
                    c[i].role = Alloc(allocated, msgs[i].Role);
                    c[i].content = Alloc(allocated, msgs[i].Content);
                }
                UIntPtr len;
                Status st = NativeMethods.ember_chat_apply_template(m.Handle, null, c, (UIntPtr)c.Length, addGenerationPrompt,
                                                                    null, UIntPtr.Zero, out len);
                Check.True(st == Status.Ok || st == Status.BufferTooSmall, "the size query: " + st);
                int need = (int)len.ToUInt64();
                // A buffer one byte short (no room for the NUL) is refused, and the size still reported.
                var small = new byte[need];
                st = NativeMethods.ember_chat_apply_template(m.Handle, null, c, (UIntPtr)c.Length, addGenerationPrompt,
                                                             small, (UIntPtr)small.Length, out len);
                Check.Equal(Status.BufferTooSmall, st, "a buffer without room for the NUL");
                Check.Equal(need, (int)len.ToUInt64(), "the size reported again");
                var buf = new byte[need + 1];
                st = NativeMethods.ember_chat_apply_template(m.Handle, null, c, (UIntPtr)c.Length, addGenerationPrompt,
                                                             buf, (UIntPtr)buf.Length, out len);
                Check.Equal(Status.Ok, st, "the render");
                Check.Equal((byte)0, buf[(int)len.ToUInt64()], "NUL-terminated");
                return System.Text.Encoding.UTF8.GetString(buf, 0, (int)len.ToUInt64());
            }
            finally
            {
                foreach (IntPtr p in allocated) Marshal.FreeHGlobal(p);
            }
        }

        private static IntPtr Alloc(List<IntPtr> allocated, string s)
        {
            byte[] b = Utf8.ToNative(s, "s");
            IntPtr p = Marshal.AllocHGlobal(b.Length);
            allocated.Add(p);
            Marshal.Copy(b, 0, p, b.Length);
            return p;
        }

        private static void ChatMlFallback()
        {
            Model m = ApiTests.SharedModelForTests();
            string got = m.ApplyChatTemplate(Conversation, true);
            Check.Equal(ExpectedChatMl, got, "ChatML by hand");
            Check.Equal(RawRender(m, Conversation, true), got, "the C function called directly");
            string noPrompt = m.ApplyChatTemplate(Conversation, false);
            Check.Equal(ExpectedChatMl.Substring(0, ExpectedChatMl.Length - "<|im_start|>assistant\n".Length), noPrompt,
                        "without the generation prompt");
            Check.Equal(RawRender(m, Conversation, false), noPrompt, "the C function, no generation prompt");
            // Any IEnumerable, not only arrays, and many strings pinned at once under GC pressure.
            var many = new List<ChatMessage>();
            for (int i = 0; i < 200; i++) many.Add(new ChatMessage(i % 2 == 0 ? "user" : "assistant", "turn " + i));
            GC.Collect();
            string big = m.ApplyChatTemplate(many, true);
            Check.True(big.StartsWith("<|im_start|>user\nturn 0<|im_end|>\n<|im_start|>assistant\nturn 1<|im_end|>\n"), "long conversation start");
            Check.True(big.EndsWith("<|im_start|>assistant\nturn 199<|im_end|>\n<|im_start|>assistant\n"), "long conversation end");
        }

        private static void ExplicitTemplate()
        {
            Model m = ApiTests.SharedModelForTests();
            const string tmpl =
                "{{ bos_token }}{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}" +
                "{% if add_generation_prompt %}[ASSISTANT]{% endif %}";
            string got = m.ApplyChatTemplate(Conversation, true, tmpl);
            Check.Equal("<s>[SYSTEM] You are a helpful assistant.\n[USER] Hello! Grüße, 世界\n[ASSISTANT]", got,
                        "the given template, with the model's BOS text");
            Check.Equal("<s>[SYSTEM] You are a helpful assistant.\n[USER] Hello! Grüße, 世界\n",
                        m.ApplyChatTemplate(Conversation, false, tmpl), "without the generation prompt");
        }

        private static void Errors()
        {
            Model m = ApiTests.SharedModelForTests();
            var e = Check.Throws<EmberException>(
                () => m.ApplyChatTemplate(Conversation, true, "{{ raise_exception('boom') }}"), "raise_exception");
            Check.Equal(Status.InvalidArgument, e.Status, "raise_exception status");
            Check.True(e.NativeMessage.Contains("boom"), "the template's message: " + e.NativeMessage);
            e = Check.Throws<EmberException>(() => m.ApplyChatTemplate(Conversation, true, "{% for %}"), "a syntax error");
            Check.Equal(Status.InvalidArgument, e.Status, "syntax error status");
            Check.True(e.NativeMessage.Length > 0, "a message for the syntax error");
            e = Check.Throws<EmberException>(() => m.ApplyChatTemplate(Conversation, true, "{% filter upper %}x{% endfilter %}"),
                                             "an unsupported construct");
            Check.Equal(Status.Unsupported, e.Status, "unsupported status: " + e.Message);
            Check.Throws<ArgumentNullException>(() => m.ApplyChatTemplate(null, true), "null messages");
            Check.Throws<ArgumentNullException>(() => m.ApplyChatTemplate(new ChatMessage[] { null }, true), "a null message");
            Check.Throws<ArgumentNullException>(() => new ChatMessage("user", null), "null content");
            Check.Throws<ArgumentException>(() => m.ApplyChatTemplate(new[] { new ChatMessage("user", "a\0b") }, true),
                                            "a NUL inside content");
            Check.Throws<ArgumentException>(() => m.ApplyChatTemplate(Conversation, true, "x\0y"), "a NUL inside the template");
        }

        private static void EmptyConversation()
        {
            Model m = ApiTests.SharedModelForTests();
            Check.Equal("<|im_start|>assistant\n", m.ApplyChatTemplate(new ChatMessage[0], true), "only the generation prompt");
            Check.Equal("", m.ApplyChatTemplate(new List<ChatMessage>(), false), "nothing at all");
            Check.Equal("n=0", m.ApplyChatTemplate(new ChatMessage[0], false, "n={{ messages | length }}"), "an explicit template");
        }
    }
}
