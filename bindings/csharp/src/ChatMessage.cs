using System;

namespace Ember
{
    /// <summary>One message of a conversation for Model.ApplyChatTemplate (ember_chat_message): a role
    /// ("system", "user", "assistant", ... whatever the model's template knows) and its text.</summary>
    public sealed class ChatMessage
    {
        public ChatMessage(string role, string content)
        {
            if (role == null) throw new ArgumentNullException("role");
            if (content == null) throw new ArgumentNullException("content");
            Role = role;
            Content = content;
        }

        public string Role { get; private set; }
        public string Content { get; private set; }
    }
}
