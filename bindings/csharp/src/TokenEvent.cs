namespace Ember
{
    /// <summary>One generated token and the text it completes: whole UTF-8 characters only, so the
    /// text may be empty while a character spans several tokens.</summary>
    public struct TokenEvent
    {
        public TokenEvent(int token, string text, bool isEndOfGeneration)
        {
            Token = token;
            Text = text;
            IsEndOfGeneration = isEndOfGeneration;
        }

        public int Token { get; private set; }
        public string Text { get; private set; }
        /// <summary>The token ends generation: an end-of-generation token (not fed to the session), or,
        /// from Next with Session.SetStop, a token that completes a stop string (fed; the text ends
        /// before the stop string).</summary>
        public bool IsEndOfGeneration { get; private set; }

        public override string ToString() { return Token + ":" + Text; }
    }
}
