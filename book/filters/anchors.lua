--[[
anchors.lua: give every heading with an identifier a self-link, so that a
reader can copy the address of any section. The link has no text of its own
(book.css draws a "#" for it), so tables of contents stay clean.
]]

function Header(h)
  if h.identifier ~= "" then
    h.content:insert(pandoc.Link({}, "#" .. h.identifier, "",
      pandoc.Attr("", {"anchor"}, {["aria-label"] = "Link to this section"})))
    return h
  end
end
